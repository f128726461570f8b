"""Splitting a long paragraph into passages: the same passages as before, in time linear in its length."""

from __future__ import annotations

import time

from agent_handshake.retrieval.chunking import Chunk, split_markdown


def _unpunctuated(words: int) -> str:
    """A transcript or word list pasted without a sentence break: one paragraph of ``words`` words."""
    return " ".join(f"word{n % 997}" for n in range(words))


def _sliced(text: str, heading: str, limit: int) -> list[Chunk]:
    """The passages of one paragraph without sentence breaks: consecutive ``limit``-word slices, no overlap (the
    overlap is made of whole sentences of at most the overlap's length, and such a paragraph has none)."""
    words = text.split()
    return [
        Chunk(position, heading, " ".join(words[start : start + limit]))
        for position, start in enumerate(range(0, len(words), limit))
    ]


def test_passages_of_normal_text_keep_their_cuts_and_overlap():
    markdown = (
        "# Kettle\n\nFill it. Boil the water. Pour it over the leaves and wait three minutes before you drink.\n\n"
        "Rinse the pot."
    )
    assert split_markdown(markdown, max_words=8, overlap_words=3) == [
        Chunk(0, "Kettle", "Fill it. Boil the water."),
        Chunk(1, "Kettle", "Boil the water. Pour it over the leaves and wait three"),
        Chunk(2, "Kettle", "minutes before you drink.\n\nRinse the pot."),
    ]


def test_a_sentence_longer_than_a_passage_is_cut_at_words_between_its_neighbours():
    # "w1" does not start a sentence (lower case), so the first sentence runs to "and then."
    words = " ".join(f"w{n}" for n in range(1, 21))
    markdown = f"## Transcript\n\nSo we said yes. {words} and then. Then we left."
    assert split_markdown(markdown, max_words=8, overlap_words=3) == [
        Chunk(0, "Transcript", "So we said yes. w1 w2 w3 w4"),
        Chunk(1, "Transcript", "w5 w6 w7 w8 w9 w10 w11 w12"),
        Chunk(2, "Transcript", "w13 w14 w15 w16 w17 w18 w19 w20"),
        Chunk(3, "Transcript", "and then. Then we left."),
    ]


def test_a_long_unpunctuated_paragraph_is_cut_into_consecutive_slices():
    text = _unpunctuated(20_003)
    assert split_markdown(f"## Word list\n\n{text}") == _sliced(text, "Word list", 160)
    assert split_markdown(text, max_words=50, overlap_words=10) == _sliced(text, "", 50)
    # Line breaks inside the paragraph are white space like any other.
    assert split_markdown(text.replace(" ", "\n")) == _sliced(text, "", 160)


def _seconds(text: str) -> float:
    """The best of three runs, so a pause of the machine does not count."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        split_markdown(text)
        best = min(best, time.perf_counter() - started)
    return best


def test_splitting_a_long_unpunctuated_paragraph_takes_linear_time():
    # Quadratic splitting took 60x as long for 8x the words (2 s at 400,000 words), so saving a page with a pasted
    # transcript held the request for seconds to minutes when INDEX_ON_SAVE is "sync". Linear time is about 8x;
    # the bound leaves twice that and a little more for the machine's noise.
    small, large = _seconds(_unpunctuated(50_000)), _seconds(_unpunctuated(400_000))
    assert large < 16 * small + 0.05, f"50,000 words: {small:.3f} s, 400,000 words: {large:.3f} s"
