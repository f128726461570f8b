"""The site's content as a competitor of the capabilities, for a caller that names a ``default`` capability (the
one that answers questions from the content: AHP names ``content_search``).

:func:`content_fit` is how well the content fits a request: the best passage's similarity to it. It is the floor
an action capability has to reach (:func:`~.decision.route`), and among the answering capabilities it is the
default's fit as well as its texts' (:func:`as_question`): the default's two generic texts fit a question about
the content less than the examples of ``site_info`` or ``contact``, which are questions too, and the passage that
answers it fits it well.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

import numpy as np

from ...conf import app_settings
from ...registry import Capability, content_registry
from ...retrieval.hybrid import Filters, HybridRetriever
from ...retrieval.index import EmbeddingModelChanged
from .. import errors
from .scoring import Scored

logger = logging.getLogger(__name__)
#: How much a passage's similarity is discounted before it counts as the default capability's fit among the
#: answering capabilities (see :func:`as_question`); chosen on the routing benchmark's tune half (bench/README.md).
QUESTION_CONTENT_MARGIN = 0.2


def content_fit(vector: np.ndarray, capability: Capability, excluding: Sequence[str] = ()) -> float:
    """How well the site's content fits a request: the best cosine similarity of a passage that ``capability``
    answers from (all content when it names no models), leaving out the models ``excluding`` names, to
    ``vector``; 0 with an empty index (or nothing left)."""
    models = capability.models
    if excluding:
        left_out = {label.lower() for label in excluding}
        models = tuple(
            config.label
            for config in content_registry
            if config.label.lower() not in left_out and (not models or config.label in models)
        )
        if not models:
            return 0.0
    retriever = HybridRetriever()
    try:
        # A full candidate list, not one row: with a filter, pgvector's iterative scan would stop at the first row
        # that passes it, which on the HNSW plan of a large site is often not the nearest.
        nearest = retriever.vector_candidates(vector, Filters(models=models), app_settings.HNSW_EF_SEARCH)
    except EmbeddingModelChanged as exc:
        # The content's fit cannot be measured until the passages are embedded again with the configured model.
        logger.exception("Routing is unavailable")
        raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
    return nearest[0][1] if nearest else 0.0


def as_question(
    ranked: list[Scored],
    default: Capability,
    vector: np.ndarray,
    *,
    content: Callable[[Sequence[str]], float] | None = None,
) -> list[Scored]:
    """``ranked`` (answering capabilities only) with the ``default``'s fit taken from the content as well as from
    its texts: the best passage outside what the other capabilities answer from (``site_info``'s about pages, a
    ``get_<model>``'s model), less ``QUESTION_CONTENT_MARGIN``, when that is more. The default's two generic texts
    fit a content question ("What is L-theanine?") less than ``site_info``'s or ``contact``'s examples, which are
    questions too; the passage that answers it fits it well. The content they answer from is left out, as an
    action's object is (an about page fits the about question). ``content``: that passage's similarity given the
    models left out, from searches :func:`~.decision.route` already made for this request (:func:`content_fit`
    otherwise)."""
    theirs = {label for item in ranked if item.capability is not default for label in item.capability.models}
    if content is None:
        content = functools.partial(content_fit, vector, default)
    fit = content(tuple(sorted(theirs))) - QUESTION_CONTENT_MARGIN
    adjusted = [
        Scored(item.capability, max(item.score, fit), item.topical) if item.capability is default else item
        for item in ranked
    ]
    return sorted(adjusted, key=lambda item: -item.score)
