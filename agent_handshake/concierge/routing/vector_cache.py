"""The capabilities' text vectors, computed once per deployment, not per process or request.

:func:`described` keeps them in the ``CACHE_ALIAS`` cache (no expiry), one entry per capability and embedding model
(:func:`vectors_key`), with a hash of the texts they were computed for (:func:`cache_key`): a deploy that changes the
model computes them again, one that changes a text (or a routing example filed) computes the new text alone, and
every process behind a shared cache (Redis, Memcached, the database) reads the first one's. With the default
local-memory cache that is once per process, still never per request, and a query's own LRU entries never push
them out. The texts are the capabilities' as they are routed (:func:`~.masking.routed_texts`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.core.cache import caches
from django.utils.crypto import salted_hmac

from ...conf import app_settings
from ...registry import Capability
from ...retrieval.embeddings import EmbeddingBackend, EmbeddingUnavailable, get_embedding_backend
from .. import errors
from .masking import name_pattern, object_names, routed_texts

logger = logging.getLogger(__name__)
#: The salt of :func:`vectors_key`: the name of the module that kept the vectors when routing was one module. The
#: keys of every deployment's cached vectors are made with it, so it stays what it was: another salt would leave
#: every entry behind and compute every capability's texts again.
VECTORS_KEY_SALT = "agent_handshake.concierge.routing"


def cache_key(backend: EmbeddingBackend, texts: Sequence[str]) -> str:
    """What names a capability's matrix of vectors: the model and the texts (a digest of them)."""
    digest = hashlib.sha256(json.dumps([backend.model_id, backend.dimensions, list(texts)]).encode()).hexdigest()
    return f"agent_handshake:routing:{digest}"


def vectors_key(backend: EmbeddingBackend, name: str) -> str:
    """Where a capability's vectors are kept for ``backend``'s model: one entry per capability and model, so texts
    that change (a routing example filed or deleted) replace its entry rather than leave one behind. Keyed with the
    site's ``SECRET_KEY`` too: two sites sharing one cache (staging and production on one Redis, without a
    ``KEY_PREFIX``) each keep their own, rather than each computing its texts again over the other's."""
    digest = salted_hmac(VECTORS_KEY_SALT, json.dumps([backend.model_id, backend.dimensions, name]), algorithm="sha256")
    return f"agent_handshake:routing:vectors:{digest.hexdigest()}"


def _stored(entry: Any, backend: EmbeddingBackend) -> tuple[str, tuple[str, ...], np.ndarray] | None:
    """A capability's cache entry as :func:`keyed_described` writes it, or None for anything else (an entry of
    another format, written by another version of the app, is computed again rather than break routing)."""
    if not (isinstance(entry, tuple) and len(entry) == 3):
        return None
    key, texts, matrix = entry
    if not (isinstance(key, str) and isinstance(texts, tuple) and isinstance(matrix, np.ndarray)):
        return None
    return entry if matrix.shape == (len(texts), backend.dimensions) else None


def described(capabilities: Sequence[Capability], backend: EmbeddingBackend | None = None) -> list[np.ndarray]:
    """Each capability's text vectors (one row per text of :func:`~.masking.routed_texts`), from the cache where they
    are."""
    return [matrix for _, matrix in keyed_described(capabilities, backend)]


def keyed_described(
    capabilities: Sequence[Capability], backend: EmbeddingBackend | None = None
) -> list[tuple[str, np.ndarray]]:
    """:func:`described`, each matrix with its :func:`cache_key` (the model and the texts).

    Each capability's entry (:func:`vectors_key`) holds the key of the texts it was computed for, the texts and the
    matrix. When its texts have changed, the vectors of the texts it already held are kept and only the new texts
    are computed: one example filed costs one text's run, not its capability's two hundred."""
    backend = backend or get_embedding_backend()
    cache = caches[app_settings.CACHE_ALIAS]
    pattern = name_pattern(capabilities)
    objects = object_names()
    described_texts = [routed_texts(capability, pattern, objects) for capability in capabilities]
    keys = [cache_key(backend, texts) for texts in described_texts]
    slots = [vectors_key(backend, capability.name) for capability in capabilities]
    stored = {slot: entry for slot, entry in cache.get_many(slots).items() if _stored(entry, backend)}
    found: dict[str, np.ndarray] = {}
    stale = []
    for key, slot, texts in zip(keys, slots, described_texts, strict=True):
        entry = stored.get(slot)
        if entry is not None and entry[0] == key:
            found[key] = entry[2]
        else:
            stale.append((key, slot, texts))
    if stale:
        known: dict[str, np.ndarray] = {}
        for _, slot, _ in stale:
            if slot in stored:
                _, held_texts, matrix = stored[slot]
                known.update(zip(held_texts, matrix, strict=True))
        new = [text for text in dict.fromkeys(text for _, _, texts in stale for text in texts) if text not in known]
        if new:
            try:
                # compute, not embed: these belong in the shared cache, not in the process's LRU of query texts.
                known.update(zip(new, np.asarray(backend.compute(new), dtype=np.float32), strict=True))
            except EmbeddingUnavailable as exc:
                logger.exception("Routing is unavailable")
                raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
        computed = {}
        for key, slot, texts in stale:
            found[key] = (
                np.stack([known[text] for text in texts]) if texts else np.zeros((0, backend.dimensions), np.float32)
            )
            computed[slot] = (key, tuple(texts), found[key])
        cache.set_many(computed, timeout=None)
    return [(key, found[key]) for key in keys]
