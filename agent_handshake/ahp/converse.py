"""``POST /agent/converse`` (AHP §6): the conversational endpoint.

The order of work: refuse oversize bodies, parse and validate, authenticate, count the request (per API key;
without one, per client network and per ``requesting_agent`` from that network), find the capability, check its
auth and scope, negotiate the content type. A MODE3 capability continues in :mod:`.invoke`; a MODE2 one is a
:class:`~agent_handshake.concierge.conversation.Question` to the concierge, whose
:class:`~agent_handshake.concierge.conversation.Turn` (or domain error) is rendered here. Every response, errors
included, is AHP JSON with the four ``X-RateLimit-*`` headers.

A request without ``capability`` is routed (:func:`route`): a session it continues keeps its capability (or, after
a routing clarification, takes the one its ``clarification`` chooses); otherwise the query (or its
``context.intent_vector``) is ranked among :func:`converse_capabilities` with ``content_search`` as the default for
questions, and a clear winner answers as if it had been named (``meta.capability_used`` says which); a tie or a
low score is a ``clarification_needed`` listing the candidates (§6.3).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.http import HttpResponseBase, JsonResponse
from rest_framework.request import Request

from .. import content_signals
from ..concierge import errors, routing
from ..concierge import limits as ratelimit
from ..concierge.conversation import Owner, Question, Turn, converse
from ..concierge.invocation import authorize
from ..frontdoor import described
from ..identity import auth
from ..identity.authentication import AgentKeyAuthentication
from ..registry import Capability, content_registry
from ..retrieval.hybrid import Filters
from . import invoke
from .base import AHPView, BodyTokenAuthentication, converse_capabilities
from .errors import error_response
from .negotiation import UnsupportedType, negotiate
from .openapi import CONVERSE
from .request import ConverseRequest, RequestError, parse_data

logger = logging.getLogger(__name__)


#: The capability a question goes to when it names none and no action capability claims it.
DEFAULT_CAPABILITY = "content_search"


def route(converse_request: ConverseRequest, capabilities: list[Capability]) -> routing.Route:
    """The routing of a request that names no capability (see :mod:`agent_handshake.concierge.routing`)."""
    vector = None
    if converse_request.intent_vector is not None:
        vector = routing.intent_vector(converse_request.intent_vector, name="context.intent_vector")
    default = next((c for c in capabilities if c.name == DEFAULT_CAPABILITY), None)
    return routing.route(converse_request.query, capabilities, vector=vector, default=default)


def rate_limited(usage: ratelimit.Usage, message: str) -> JsonResponse:
    return error_response(429, "rate_limited", message, scope=usage.public_scope, retry_after=usage.retry_after)


class ConverseView(AHPView):
    http_method_names = ["post", "options"]
    authentication_classes = [AgentKeyAuthentication, BodyTokenAuthentication]
    #: The body is read and validated before the credentials are checked (they may be in it).
    lazy_authentication = True

    #: How MODE3 fields are named in errors: where the body carries the structured input.
    input_prefix = "context.input."

    def parse(self, request: Request) -> ConverseRequest:
        """The request body as a :class:`ConverseRequest`, or :class:`RequestError`."""
        return parse_data(request.data)

    @described(**CONVERSE)
    def post(self, request: Request, **kwargs: Any) -> HttpResponseBase:
        try:
            converse_request = self.parse(request)
        except RequestError as exc:
            extra = dict(exc.extra)
            return error_response(extra.pop("status", 400), exc.code, exc.message, **extra)
        request.user  # noqa: B018 - authenticates (headers, then the body's auth field)
        credentials = request.auth
        django_request = request._request
        anonymous_name = converse_request.requesting_agent if credentials is None else ""
        # The name is counted before the network's count may refuse: a 429 waits for whichever resets last.
        agent = ratelimit.count_agent(django_request, anonymous_name) if anonymous_name else None
        if agent is not None:
            self.counter.usages.append(agent)
        self.count(request)
        if agent is not None and agent.exceeded:
            return rate_limited(self.counter.refusal(agent), "Rate limit exceeded for this agent identity.")
        capabilities = converse_capabilities()
        if converse_request.capability is None and capabilities:
            routed = self.routed(converse_request, capabilities, credentials, django_request)
            if isinstance(routed, HttpResponseBase):
                return routed
            converse_request = routed
        capability = next((c for c in capabilities if c.name == converse_request.capability), None)
        if capability is None:
            # With none to route among (a MODE1 site), a clarification would offer nothing, and ask again for ever.
            named = converse_request.capability
            return error_response(
                400,
                "unknown_capability",
                f"The capability {named!r} is not supported." if named else "This site has no capability to answer.",
                available_capabilities=[c.name for c in capabilities],
            )
        authorize(capability, credentials)  # 401 / 403, rendered as §10 errors by the front door
        try:
            negotiated = negotiate(capability, converse_request.accept_types)
        except UnsupportedType as exc:
            return error_response(
                400,
                "unsupported_type",
                f"{capability.name} cannot return any of {converse_request.accept_types}.",
                available_types=exc.available,
            )
        if capability.action_type is not None:  # MODE3
            invocation = invoke.Call(
                django_request,
                converse_request,
                capability,
                credentials,
                negotiated,
                self.counter.usages,
                input_prefix=self.input_prefix,
            )
            return invocation.respond()
        owner = Owner.of(credentials, ratelimit.client_address(django_request))
        question = Question(
            capability=capability,
            text=converse_request.query,
            session_id=converse_request.session_id,
            clarification=converse_request.clarification,
            content_type=negotiated.content_type,
            fallback_from=negotiated.fallback_from,
            max_tokens=converse_request.max_tokens,
            filters=self.filters(converse_request),
            requesting_agent=converse_request.requesting_agent,
        )
        turn = converse(question, owner)
        return render_turn(turn, capability, negotiated.fallback_from)

    def routed(
        self,
        converse_request: ConverseRequest,
        capabilities: list[Capability],
        credentials: auth.Credentials | None,
        django_request: Any,
    ) -> ConverseRequest | HttpResponseBase:
        """The request with the capability routing chose, or the clarification asking which one."""
        owner = Owner.of(credentials, ratelimit.client_address(django_request))
        if converse_request.session_id:
            chosen, by_choice = routing.resume(
                converse_request.session_id, owner, converse_request.clarification, capabilities
            )
            if chosen is not None:
                # A clarification that chose the capability is not also an answer to that capability's questions.
                clarification = None if by_choice else converse_request.clarification
                return dataclasses.replace(converse_request, capability=chosen.name, clarification=clarification)
        found = route(converse_request, capabilities)
        if found.chosen is not None:
            return dataclasses.replace(converse_request, capability=found.chosen.name)
        offer = routing.offer(found, converse_request.query, converse_request.requesting_agent, owner)
        return JsonResponse(
            {
                "status": "clarification_needed",
                "session_id": offer.session_id,
                "clarification": {"question": offer.question, "options": offer.options, "free_form": True},
            }
        )

    def filters(self, converse_request: ConverseRequest) -> Filters:
        models: list[str] = []
        # A section may hold several models: it filters to all of them.
        sections: dict[str, list[str]] = {}
        for config in content_registry:
            sections.setdefault(config.get_section().lower(), []).append(config.label)
        for name in converse_request.sections:
            labels = sections.get(name.lower()) or [name.lower()]
            try:
                models.extend(content_registry.get_config_by_label(label).label for label in labels)
            except LookupError as exc:
                raise errors.InvalidInput(
                    f"context.filters.sections: unknown section {name!r}.",
                    fields=["context.filters.sections"],
                    available_sections=sorted(sections),
                ) from exc
        return Filters(
            models=models,
            content_types=converse_request.content_types,
            published_after=converse_request.published_after,
            published_before=converse_request.published_before,
        )


def render_turn(turn: Turn, capability: Capability, fallback_from: str | None) -> JsonResponse:
    """A turn as the AHP success or ``clarification_needed`` body (§6.2, §6.3)."""
    if turn.clarification is not None:
        clarification = turn.clarification
        return JsonResponse(
            {
                "status": "clarification_needed",
                "session_id": turn.session_id,
                "clarification": {
                    "question": clarification.question,
                    "options": clarification.options,
                    "free_form": clarification.free_form,
                },
            }
        )
    reply = turn.reply
    assert reply is not None
    meta: dict[str, Any] = {
        "tokens_used": reply.tokens_used,
        "capability_used": capability.name,
        "mode": capability.mode,
        "cached": turn.cached,
        "content_type": reply.content_type,
        "content_signals": reply.content_signals,
    }
    if fallback_from:
        meta["fallback_from"] = fallback_from
    if reply.guardrail:
        meta["guardrail"] = reply.guardrail
    response = JsonResponse(
        {"status": "success", "session_id": turn.session_id, "response": reply.response(), "meta": meta}
    )
    if reply.content_signals:
        response.headers[content_signals.HEADER] = content_signals.header_value(reply.content_signals)
    return response
