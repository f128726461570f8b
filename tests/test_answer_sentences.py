"""Which sentence an extractive answer leads with when the question is phrased away from the page: the page's
title counts for all of its sentences alike, and determiners are not content words."""

from __future__ import annotations

from agent_handshake.concierge.extractive import Passage, answer, terms

TEAPOT = Passage(
    1,
    "A Yixing clay teapot, hand-thrown in Dingshu from zisha clay, with a 200 ml capacity and a pierced strainer. "
    "Never put it in a dishwasher; rinse it with hot water only and let it dry with the lid off.",
    "Yixing Clay Teapot",
)


def test_the_title_counts_for_every_sentence_of_its_page():
    # Both sentences are about the teapot (the title says so); the one that answers leads, not the one that
    # repeats the title's words.
    text, cited = answer("Can the Yixing clay teapot go in the dishwasher?", [TEAPOT], budget=60)
    assert text.startswith("Never put it in a dishwasher"), text
    assert cited == {1}


def test_determiners_are_not_content_words():
    assert terms("Pour it from one cup to another, each time") == {"pour", "cup", "time"}
