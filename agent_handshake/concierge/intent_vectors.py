"""An agent's own intent vector, where its protocol lets it send one that may come from another model.

The Agent Semantic Protocol's ``intent_vector`` is optional and says nothing of the model that made it: a vector of
the site embedding model's dimensions is used for routing (checked and normalised by
:func:`~.routing.intent_vector`), any other, or one that is not usable (all zeros, not finite), is left out, and the
request's text is embedded instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np

from ..retrieval.embeddings import get_embedding_backend
from . import errors, routing


def usable_intent_vector(values: Sequence[float]) -> np.ndarray | None:
    """``values`` ready for :func:`~.routing.route`'s ``vector``, or None when routing should embed the text."""
    if len(values) != get_embedding_backend().dimensions:
        return None
    with contextlib.suppress(errors.InvalidInput):
        return routing.intent_vector(values)
    return None
