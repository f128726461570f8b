"""Cue words: a word of a capability's own texts that no other capability's texts have. A request that has one
of a capability's cue words adds ``ROUTING_CUE_WEIGHT`` to its score for it (:func:`~.scoring.rank`). The words are
compared by their first letters, a crude stem that serves any language that writes words apart; the site's name
reads them too (:func:`~.masking.distinctive_name`).
"""

from __future__ import annotations

import functools
import re

#: Cue words are compared by their first letters (see :func:`words`).
CUE_PREFIX = 5


def words(text: str) -> set[str]:
    """A text's words as cue tokens: lowercased, their first ``CUE_PREFIX`` letters (a crude stem that serves any
    language that writes words apart: "booking" and "book", "stocked" and "stock"), numbers and short words out."""
    return {word[:CUE_PREFIX] for word in re.findall(r"[^\W\d_]{3,}", text.lower())}


@functools.lru_cache(maxsize=64)
def cues(described_texts: tuple[tuple[str, ...], ...]) -> list[frozenset[str]]:
    """Each capability's cue words: the words of its own texts that no other capability's texts have."""
    bags = [set().union(*(words(text) for text in texts)) for texts in described_texts]
    return [frozenset(bag.difference(*bags[:index], *bags[index + 1 :])) for index, bag in enumerate(bags)]
