"""The request's vector: its embedding with the site's embedding backend (:func:`embed_query`,
:func:`embed_queries`), or a vector the caller brings (an agent's ``intent_vector``, Agent Semantic Protocol §8),
used as it is once :func:`intent_vector` has checked that it has the model's dimensions and normalised it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...retrieval.embeddings import EmbeddingBackend, EmbeddingUnavailable, get_embedding_backend
from .. import errors

logger = logging.getLogger(__name__)


def intent_vector(
    values: Sequence[Any], backend: EmbeddingBackend | None = None, *, name: str = "intent_vector"
) -> np.ndarray:
    """A caller's intent vector, checked (finite numbers, the site model's dimensions, not all zero, a length that
    32-bit floats can hold) and normalised; :class:`~.errors.InvalidInput` naming ``name`` otherwise."""
    backend = backend or get_embedding_backend()
    numbers = isinstance(values, (list, tuple)) and all(
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) for value in values
    )
    if not numbers:
        raise errors.InvalidInput(f"{name} must be a list of finite numbers.", fields=[name])
    if len(values) != backend.dimensions:
        raise errors.InvalidInput(
            f"{name} has {len(values)} dimensions; this site's embedding model ({backend.model_id}) has "
            f"{backend.dimensions}. Send the query alone and the site embeds it.",
            fields=[name],
            dimensions=backend.dimensions,
            model=backend.model_id,
        )
    if not any(values):
        raise errors.InvalidInput(f"{name} must not be all zeros.", fields=[name])
    # Finite numbers can still have a length beyond float32's range: squared, 1e20 overflows and 1e-25 underflows
    # (and past about 3e38 a number is no float32 at all). Such a vector has no direction the model's can be
    # compared with here; the warnings numpy would print for it are this error.
    with np.errstate(over="ignore", under="ignore"):
        vector = np.asarray(values, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0:
        raise errors.InvalidInput(
            f"{name} could not be normalised: its length is beyond the range of 32-bit floats. Send it at unit "
            "length (as embedding models return it).",
            fields=[name],
        )
    return vector / norm


def embed_query(text: str) -> np.ndarray:
    return embed_queries([text])[0]


def embed_queries(texts: Sequence[str]) -> np.ndarray:
    """The vectors of ``texts`` (a request as written and without the site's name), in one backend call."""
    try:
        return get_embedding_backend().embed(texts)
    except EmbeddingUnavailable as exc:
        logger.exception("Routing is unavailable")
        raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
