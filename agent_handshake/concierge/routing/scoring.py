"""A request's fit to each capability (:func:`rank`).

A capability's score is the mean similarity of its ``ROUTING_NEAREST`` texts closest to the request
(:func:`nearest_mean`), not its best one alone: the best of many examples is high by chance. The request and the
texts are compared without the site's name and the actions' objects' names (:mod:`.masking`), and their vectors
without the site's topic (:mod:`.site_topic`); a request with one of a capability's cue words (:mod:`.cue_words`)
adds ``ROUTING_CUE_WEIGHT``. The fit with the topic left in is kept as well (:attr:`Scored.topical`), for weighing an
action against the site's content (:mod:`.decision`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...conf import app_settings
from ...registry import Capability
from ...retrieval.embeddings import get_embedding_backend
from .cue_words import cues, words
from .masking import name_pattern, object_names, unnamed, unnamed_texts
from .query_vectors import embed_query
from .site_topic import off_topic, off_topic_described, topic
from .texts import declared_texts
from .vector_cache import keyed_described


@dataclass(frozen=True)
class Scored:
    capability: Capability
    #: The capability's fit to the request, the site's topic left out (see :func:`rank`): what it is chosen by.
    score: float
    #: The same fit with the site's topic left in, as the content's own fit has it: what an action capability is
    #: weighed against the content by (None: the same as ``score``).
    topical: float | None = None

    @property
    def against_content(self) -> float:
        return self.score if self.topical is None else self.topical


def nearest_mean(similarities: np.ndarray) -> float:
    """A capability's fit from its texts' similarities to a request: the mean of the ``ROUTING_NEAREST`` best (all
    when it has fewer). One close text (the best alone) favours the capabilities with the most examples, whose
    best of many is high by chance; the second best has to agree."""
    nearest = min(app_settings.ROUTING_NEAREST, len(similarities))
    return float(np.mean(np.partition(similarities, -nearest)[-nearest:]))


def rank(text: str, capabilities: Sequence[Capability], *, vector: np.ndarray | None = None) -> list[Scored]:
    """``capabilities`` by their fit to ``text`` (or to ``vector``, already normalised, when given): the mean
    similarity of their ``ROUTING_NEAREST`` closest texts (:func:`nearest_mean`), plus ``ROUTING_CUE_WEIGHT`` when
    ``text`` has one of the capability's cue words (:func:`~.cue_words.cues`), best first (ties keep the given
    order). The site's own name counts for none of them when it is distinctive (:func:`~.masking.name_pattern`,
    :func:`~.masking.without_site_name`), nor does its topic (:func:`~.site_topic.topic`,
    :func:`~.site_topic.off_topic`): the fit with the topic left in is kept as :attr:`Scored.topical`, for weighing
    an action against the content."""
    if not capabilities:
        return []
    backend = get_embedding_backend()
    keyed = keyed_described(capabilities, backend)
    matrices = [matrix for _, matrix in keyed]
    pattern = name_pattern(capabilities)
    objects = object_names()
    routed = unnamed(text, pattern, objects)
    if vector is None:
        vector = embed_query(routed)
    topical = [nearest_mean(matrix @ vector) for matrix in matrices]
    direction = topic(backend)
    if direction is None:
        scores = list(topical)
    else:
        request = off_topic(vector, direction)
        scores = [nearest_mean(off_topic_described(key, matrix, direction) @ request) for key, matrix in keyed]
    weight = app_settings.ROUTING_CUE_WEIGHT
    if weight and text:
        asked = words(routed)
        declared = tuple(unnamed_texts(tuple(declared_texts(c)), pattern, objects) for c in capabilities)
        for index, own in enumerate(cues(declared)):
            if asked & own:
                scores[index] += weight
                topical[index] += weight
    order = sorted(range(len(capabilities)), key=lambda index: -scores[index])
    return [
        Scored(capabilities[index], scores[index], None if direction is None else topical[index]) for index in order
    ]
