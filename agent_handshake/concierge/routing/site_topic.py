"""The site's topic, and the vectors without it.

The site's topic (:func:`topic`: the direction of the mean of its passages' vectors) is left out of the request's
and the capabilities' texts' vectors before a capability's fit is taken (:func:`off_topic`), as the site's name is
(:mod:`.masking`): every request to a tea shop is about tea, and so are the booking's examples, so "Who runs this
tea shop?" fits the booking with the topic left in. The fit with the topic left in is still what an action is
weighed against the content by (:attr:`~.scoring.Scored.topical`), since the passages' similarities keep it.

The topic is kept in the ``CACHE_ALIAS`` cache as the capabilities' vectors are (:mod:`.vector_cache`), one entry
per model that holds the content's state token it was computed for, so it is computed again when the content
changes. The capabilities' vectors with the topic left out are computed once per model, texts and topic too, and
kept in the process (:func:`off_topic_described`).
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading

import numpy as np
from django.core.cache import caches

from ... import state
from ...conf import app_settings
from ...retrieval.embeddings import EmbeddingBackend, get_embedding_backend
from ...retrieval.index import EmbeddingModelChanged, current_index, passages_mean

#: The site's topic is the mean of at most about this many passages' vectors (a random sample of the table's pages
#: beyond it): the mean of a few thousand is the mean of a hundred thousand to within noise, and it is computed again
#: after every change to the content.
TOPIC_SAMPLE = 5000


def topic_key(backend: EmbeddingBackend) -> str:
    """The cache key of the site's topic for ``backend``'s model: one per model, whatever the content's state."""
    return (
        "agent_handshake:routing:topic:"
        + hashlib.sha256(json.dumps([backend.model_id, backend.dimensions]).encode()).hexdigest()
    )


def topic(backend: EmbeddingBackend | None = None) -> np.ndarray | None:
    """The site's topic: the direction of the mean of its passages' vectors (normalised), or None without passages
    (or while the stored vectors are another model's, until ``agent_reindex --rebuild``).

    Computed once per state of the content and kept in the ``CACHE_ALIAS`` cache, like the capabilities' vectors:
    one entry per model, holding the state token it was computed for and the vector (float32 bytes), overwritten
    after a change, so that changes leave no entries behind; from a sample when the site has more than
    ``TOPIC_SAMPLE`` passages (:func:`~agent_handshake.retrieval.index.passages_mean`, the same sample in every
    process for one state), so that the first request after a change pays a bounded cost."""
    backend = backend or get_embedding_backend()
    key = topic_key(backend)
    token = state.snapshot().token
    cache = caches[app_settings.CACHE_ALIAS]
    found = cache.get(key)
    if not (isinstance(found, tuple) and len(found) == 2 and found[0] == token):
        try:
            index = current_index(backend, create=False)
        except EmbeddingModelChanged:
            return None
        mean = passages_mean(int(index.dimensions), TOPIC_SAMPLE, seed=token) if index is not None else []
        found = (token, np.asarray(mean, dtype=np.float32).tobytes())
        cache.set(key, found, timeout=None)
    direction = np.frombuffer(found[1], dtype=np.float32)
    if len(direction) != backend.dimensions:
        return None
    norm = float(np.linalg.norm(direction))
    return direction / norm if norm > 0 else None


def off_topic(vectors: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``vectors`` (one, or one per row) without their component along ``direction`` (a unit vector), normalised."""
    rest = vectors - np.multiply.outer(vectors @ direction, direction)
    norms = np.linalg.norm(rest, axis=-1, keepdims=True)
    return rest / np.where(norms > 0, norms, 1)


#: How many capabilities' matrices :func:`off_topic_described` keeps per process (each a few KB: a row of
#: the model's dimensions per text): every capability of a large site's registry, under a few MB.
OFF_TOPIC_ENTRIES = 256
_off_topic: collections.OrderedDict[tuple[str, bytes], np.ndarray] = collections.OrderedDict()
_off_topic_lock = threading.Lock()


def off_topic_described(key: str, matrix: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``off_topic(matrix, direction)`` for a capability's text vectors (``key``, their
    :func:`~.vector_cache.cache_key`), computed once per model, texts and topic rather than on every request, where
    it would be a sizeable part of :func:`~.scoring.rank`'s time. Kept in the process, not the shared cache as
    :func:`~.vector_cache.described` keeps the vectors: recomputing it costs less than reading it back from a cache
    (the vectors cost a model's run), and one entry per state of the content would stay behind in a cache without
    expiry."""
    entry = (key, direction.tobytes())
    with _off_topic_lock:
        found = _off_topic.get(entry)
        if found is not None:
            _off_topic.move_to_end(entry)
            return found
    found = off_topic(matrix, direction)
    found.setflags(write=False)  # shared by every request of the process
    with _off_topic_lock:
        _off_topic[entry] = found
        while len(_off_topic) > OFF_TOPIC_ENTRIES:
            _off_topic.popitem(last=False)
    return found
