"""Which capability a request in natural language is for.

Each capability is described by its intent, its description and each of its examples; a request's score for a
capability is the best cosine similarity between the request's embedding and any of those texts (with the site's
embedding backend, whose cache keeps the capabilities' vectors after the first request). The best capability is
chosen when it scores at least ``ROUTING_MIN_SCORE`` and no other is within ``ROUTING_MARGIN`` of it; otherwise
the candidates are offered for the caller to choose (IntentWeb's ``clarification_request``).

An answer to that clarification names its choice by number ("2", "the second"), by name or intent, or, failing
that, is ranked again among the candidates only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..conf import app_settings
from ..registry import Capability
from ..retrieval.embeddings import EmbeddingUnavailable, get_embedding_backend
from . import errors

logger = logging.getLogger(__name__)
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "one": 1, "two": 2, "three": 3}


@dataclass(frozen=True)
class Scored:
    capability: Capability
    score: float


@dataclass
class Route:
    """The capability chosen, or None with the candidates to offer (best first)."""

    chosen: Capability | None
    ranked: list[Scored] = field(default_factory=list)

    @property
    def candidates(self) -> list[Capability]:
        return [item.capability for item in self.ranked]


def texts_of(capability: Capability) -> list[str]:
    return [capability.intent_text, capability.description, *capability.examples]


def rank(text: str, capabilities: Sequence[Capability]) -> list[Scored]:
    """``capabilities`` by their best similarity to ``text``, best first (ties keep the given order)."""
    if not capabilities:
        return []
    described = [texts_of(capability) for capability in capabilities]
    flat = [item for texts in described for item in texts]
    try:
        vectors = get_embedding_backend().embed([text, *flat])
    except EmbeddingUnavailable as exc:
        logger.exception("Routing is unavailable")
        raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
    similarity = vectors[1:] @ vectors[0]
    scores, start = [], 0
    for texts in described:
        scores.append(float(np.max(similarity[start : start + len(texts)])))
        start += len(texts)
    order = sorted(range(len(capabilities)), key=lambda index: -scores[index])
    return [Scored(capabilities[index], scores[index]) for index in order]


def route(text: str, capabilities: Sequence[Capability]) -> Route:
    ranked = rank(text, capabilities)
    if not ranked:
        return Route(None, [])
    best = ranked[0].score
    if best < app_settings.ROUTING_MIN_SCORE:
        return Route(None, ranked)
    close = [item for item in ranked if best - item.score <= app_settings.ROUTING_MARGIN]
    if len(close) > 1:
        return Route(None, close)
    return Route(ranked[0].capability, ranked)


def choose(answer: str, candidates: Sequence[Capability]) -> Capability | None:
    """The candidate an answer to "which one?" names, or the best of them by meaning (None if there are none)."""
    if not candidates:
        return None
    lowered = answer.lower()
    number = re.fullmatch(r"\W*(?:the\s+)?(\d+|[a-z]+)(?:st|nd|rd|th)?\W*(?:one)?\W*", lowered)
    if number:
        word = number.group(1)
        index = int(word) if word.isdigit() else ORDINALS.get(word)
        if index is not None and 1 <= index <= len(candidates):
            return candidates[index - 1]
    named = [
        capability
        for capability in candidates
        if capability.name in lowered or capability.intent_text.lower() in lowered
    ]
    if len(named) == 1:
        return named[0]
    return rank(answer, named or candidates)[0].capability
