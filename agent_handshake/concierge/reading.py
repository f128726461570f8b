"""The reader's part of an answer: which retrieved sentences answer the question, and whether any does.

Retrieval finds the passages nearest the question, and they are near even when the site does not answer it: a
question about a drink the site never covers lands on the pages about its neighbours, and the best of them still
ranks first. Whether to answer is therefore the reader's call (:mod:`~agent_handshake.retrieval.reader`, a
cross-encoder that reads the question and a sentence together): its best score over the candidate sentences, under
``READER_MIN_SCORE``, means the site has nothing that answers, however close the pages are. The same scores choose
the sentence the extractive answer leads with.

A cross-encoder costs a model run per sentence, so it reads only the candidates the word scores of
:func:`~.extractive.rank` put first: the :data:`CANDIDATES` best overall and the best :data:`PER_PASSAGE` of each
passage, so that a passage whose answer shares few of the question's words still has one read. The scores are kept
per question and sentence for a moment (:func:`_scores`), so that the decision and the answer read each sentence
once. Without the model files (``READER_MODEL_DIR``), :func:`read` returns None and answers are chosen by the word
scores and the retrieval floor alone, as the system check ``agent_handshake.W010`` says.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from ..retrieval.reader import Reader, get_reader
from . import extractive

#: How many of the best-scored candidate sentences the reader reads, and at least how many of each passage.
CANDIDATES = 6
PER_PASSAGE = 0


@dataclass(frozen=True)
class Reading:
    """The reader's scores (logits) of a question's candidate sentences, by :func:`~.extractive.key` of their text,
    and the best of them with the source it comes from."""

    scores: dict[str, float]
    best: float
    best_source: int


def candidates(question: str, passages: Sequence[extractive.Passage]) -> list[extractive.Unit]:
    """The sentences the reader reads for ``question``: the best by word score, and each passage's best few."""
    ranking = extractive.rank(question, passages)
    chosen = ranking.best(CANDIDATES)
    per_passage: dict[int, int] = {}
    for unit in ranking.best(len(ranking.units)):
        if per_passage.get(unit.passage, 0) < PER_PASSAGE:
            per_passage[unit.passage] = per_passage.get(unit.passage, 0) + 1
            if unit not in chosen:
                chosen.append(unit)
    return chosen


def read(question: str, passages: Sequence[extractive.Passage]) -> Reading | None:
    """The reader's scores of ``question``'s candidate sentences; None when no reader model is installed."""
    reader = get_reader()
    if reader is None:
        return None
    units = candidates(question, passages)
    if not units:
        return Reading({}, float("-inf"), 0)
    logits = _scores(reader, question, tuple(in_context(unit, passages) for unit in units))
    best = max(range(len(units)), key=lambda index: logits[index])
    scores: dict[str, float] = {}
    for unit, logit in zip(units, logits, strict=True):
        scores[extractive.key(unit.text)] = max(logit, scores.get(extractive.key(unit.text), float("-inf")))
    return Reading(scores, logits[best], units[best].source)


def in_context(unit: extractive.Unit, passages: Sequence[extractive.Passage]) -> str:
    """The sentence as the reader reads it: after its page's title and section heading, which say what it is about
    ("Gyokuro > Brewing: We brew it at 50 to 60 °C" answers a question about gyokuro; the sentence alone does not)."""
    passage = passages[unit.passage]
    context = " > ".join(part for part in (passage.title, passage.heading) if part)
    return f"{context}: {unit.text}" if context else unit.text


@functools.lru_cache(maxsize=64)
def _scores(reader: Reader, question: str, texts: tuple[str, ...]) -> tuple[float, ...]:
    # Keyed by the reader too: a changed READER_MODEL_DIR loads another model, whose scores these are not.
    return tuple(float(value) for value in reader.scores(question, texts))
