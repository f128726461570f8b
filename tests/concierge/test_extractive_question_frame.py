"""The "write about" frame is set aside, not the same word in the question's topic."""

from __future__ import annotations

from agent_handshake.concierge.extractive import question_terms, stem
from tests.concierge.test_extractive_sentences import Passage, lead

WORKSHOP = Passage(
    1,
    "Our writing retreats run for a weekend each spring: three days of tea, quiet rooms and feedback on your "
    "pages from our staff.",
    "Writing retreats at Lantern & Kettle",
)
RETREAT_MENU = Passage(
    2,
    "The yoga retreats end with a tasting of six spring teas. Each retreat day starts with a matcha ceremony.",
    "Yoga retreats",
)


def test_the_frame_sets_aside_its_own_word_not_the_same_word_in_the_topic():
    """ "What have you written about writing retreats?": the frame "written about" is set aside, but its stem was
    taken out of the whole question, so the topic lost "writing" and the yoga retreats answered it."""
    assert stem("writing") in question_terms("What have you written about writing retreats?")
    assert stem("blogging") in question_terms("What did you blog about blogging?")
    text = lead("What have you written about writing retreats?", [RETREAT_MENU, WORKSHOP])
    assert text.startswith("Our writing retreats"), text
    # The frame alone is still set aside.
    assert stem("write") not in question_terms("What did you write about cold brew?")
