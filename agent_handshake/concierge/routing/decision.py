"""The routing decision: a capability, or the candidates to offer (:func:`route`).

:func:`route_ranked` chooses the best capability when it scores at least ``ROUTING_MIN_SCORE`` and no other is
within ``ROUTING_MARGIN`` of it; otherwise the candidates are offered for the caller to choose.

Questions about the site's content. The capabilities' texts alone cannot tell a question about the content from a
request for an action (measured in ``bench/bench_routing.py``: almost every content question, "How hot should the
water be for gyokuro?", scored closer to a MODE3 capability, whose examples name the site's products, than to
``content_search``'s generic description). So a caller may name a ``default`` capability (AHP names
``content_search``), and the default's fit is taken from what it answers from: the site's content, as the best
passage's similarity to the request (:mod:`.content`). An *action* capability (one with an ``action_type``: it reads
live data or changes something) competes only when it fits the request at least as well as the content, less
``ROUTING_CONTENT_MARGIN``; otherwise the request is a question, and goes to the default unless an answering
capability (``site_info``, ``contact``...) fits it clearly better by the usual rule. Answering a question the site
cannot answer costs a "not found"; starting an action nobody asked for costs more. The price is stock questions
about a product whose page states its stock, which the content answers too.

The content an action acts on (its ``applies_to`` models: a product's page for a stock check) is its object, not a
competing answer, so an action is weighed against the rest of the content; and it is weighed by its fit with the
site's topic left in (:attr:`~.scoring.Scored.against_content`), as the passages' similarities have it. Among the
answering capabilities the default's fit is also the content's, outside what the others answer from
(:func:`~.content.as_question`). A request that only names a topic is a question whatever the actions' fit
(:mod:`.topic_requests`). The thresholds were chosen on the routing benchmark; the measurements behind each rule
are in ``bench/README.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...conf import app_settings
from ...registry import Capability
from .content import as_question, content_fit
from .masking import name_pattern, object_names, unnamed
from .query_vectors import embed_queries, embed_query
from .scoring import Scored, rank
from .topic_requests import names_a_topic


@dataclass
class Route:
    """The capability chosen, or None with the candidates to offer (best first)."""

    chosen: Capability | None
    ranked: list[Scored] = field(default_factory=list)
    #: The default capability was chosen because no action capability claimed the request.
    defaulted: bool = False

    @property
    def candidates(self) -> list[Capability]:
        return [item.capability for item in self.ranked]


def route(
    text: str,
    capabilities: Sequence[Capability],
    *,
    vector: np.ndarray | None = None,
    default: Capability | None = None,
) -> Route:
    """The capability for ``text`` among ``capabilities``, or the close candidates to offer.

    With a ``default`` (one of ``capabilities``, the capability that answers questions from the site's content):
    an action capability competes only when it fits the request at least as well as the content does, less
    ``ROUTING_CONTENT_MARGIN`` (and from ``ROUTING_MIN_SCORE``). When none does, the request is a question: the
    answering capabilities compete by the usual rule, and a tie or a low score goes to the default rather than
    to a clarification (see this module's docstring). A ``text`` that only names a topic
    (:func:`~.topic_requests.names_a_topic`, when it is what is embedded: no ``vector``) is such a question whatever
    the actions' fit."""
    topic_only = vector is None and names_a_topic(text)
    ranking_vector = vector
    if vector is None and capabilities:
        # The content's fit takes the request as it is (the about page names the site); the capabilities' fit
        # takes it without the site's name: both in one call to the model when the name is in it.
        routed = unnamed(text, name_pattern(capabilities), object_names())
        if routed == text:
            vector = ranking_vector = embed_query(text)
        else:
            vector, ranking_vector = embed_queries([text, routed])
    ranked = rank(text, capabilities, vector=ranking_vector)
    if not ranked:
        return Route(None, [])
    if default is not None:
        assert vector is not None
        fits: dict[tuple[str, ...], float] = {}

        def fit(excluding: Sequence[str]) -> float:
            # One search per set of models left out: an action's floor and the question's fit often leave out the
            # same (a get_<model> answers from the model a stock check acts on; with neither, the whole content).
            key = tuple(sorted({label.lower() for label in excluding}))
            if key not in fits:
                fits[key] = content_fit(vector, default, key)
            return fits[key]

        def floor(capability: Capability) -> float:
            # The content an action acts on (its applies_to models: a product for a stock check) is its object,
            # not a competing answer: the action is weighed against the rest of the content.
            margin = app_settings.ROUTING_CONTENT_MARGIN
            return max(app_settings.ROUTING_MIN_SCORE, fit(list(capability.applies_to)) - margin)

        claimed = [
            item
            for item in ranked
            if not item.capability.action_type or (not topic_only and item.against_content >= floor(item.capability))
        ]
        if not any(item.capability.action_type for item in claimed):
            answering = route_ranked(as_question(claimed, default, vector, content=fit))
            if answering.chosen is None or answering.chosen is default:
                return Route(default, ranked, defaulted=answering.chosen is None)
            return Route(answering.chosen, ranked)
        ranked = claimed
    return route_ranked(ranked)


def route_ranked(ranked: list[Scored]) -> Route:
    if not ranked:
        return Route(None, [])
    best = ranked[0].score
    if best < app_settings.ROUTING_MIN_SCORE:
        return Route(None, ranked)
    close = [item for item in ranked if best - item.score <= app_settings.ROUTING_MARGIN]
    if len(close) > 1:
        return Route(None, close)
    return Route(ranked[0].capability, ranked)
