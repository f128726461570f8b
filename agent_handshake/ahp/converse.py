"""``POST /agent/converse`` (AHP §6): the conversational endpoint.

The order of work: refuse oversize bodies, parse and validate, authenticate, count the request (per API key;
without one, per client network and per ``requesting_agent`` from that network). Then one call into the concierge,
:func:`~agent_handshake.concierge.turns.take_turn`, which routes a request that names no capability, checks the
capability's auth and scope, negotiates the content type, and asks the question (MODE2) or calls the capability
(MODE3). What comes back is rendered here: a routing offer or a conversation's clarification as
``clarification_needed`` (§6.3), an answer or a call's result as AHP's success, ``accepted`` or error body. Every
response, errors included, is AHP JSON with the four ``X-RateLimit-*`` headers.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase, JsonResponse
from django.urls import reverse
from rest_framework.request import Request

from .. import content_signals, state
from ..concierge import calls
from ..concierge import limits as ratelimit
from ..concierge.conversation import Turn
from ..concierge.negotiation import Negotiated
from ..concierge.turns import Answered, Caller, Offered, TurnRequest, take_turn
from ..frontdoor import REPLAYED, described
from ..identity.authentication import AgentKeyAuthentication
from ..registry import Capability
from .base import AHPView, BodyTokenAuthentication
from .errors import error_response
from .openapi import CONVERSE
from .render import response_meta, response_object
from .request import ConverseRequest, RequestError, parse_data


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
        address = self.counter.address
        anonymous_name = converse_request.requesting_agent if credentials is None else ""
        # The name is counted before the network's count may refuse: a 429 waits for whichever resets last.
        agent = ratelimit.count_agent(address, anonymous_name) if anonymous_name else None
        if agent is not None:
            self.counter.usages.append(agent)
        self.count(request)
        if agent is not None and agent.exceeded:
            return rate_limited(self.counter.refusal(agent), "Rate limit exceeded for this agent identity.")
        turn_request = self.turn_request(converse_request, request)
        result = take_turn(turn_request, Caller(credentials, address, self.counter.usages), render_call)
        if isinstance(result, Offered):
            return clarification_needed(result.session_id, result.question, result.options, free_form=True)
        if isinstance(result, Answered):
            return render_turn(result.turn, result.capability, result.negotiated.fallback_from)
        response = JsonResponse(result.body, status=result.status)
        if result.replayed:
            response.headers[REPLAYED] = "true"
        return response

    def turn_request(self, converse_request: ConverseRequest, request: Request) -> TurnRequest:
        """The parsed body in the concierge's words, with the names of AHP's fields for its errors."""
        return TurnRequest(
            query=converse_request.query,
            capability=converse_request.capability,
            session_id=converse_request.session_id,
            clarification=converse_request.clarification,
            requesting_agent=converse_request.requesting_agent,
            max_tokens=converse_request.max_tokens,
            accept_types=converse_request.accept_types,
            sections=converse_request.sections,
            content_types=converse_request.content_types,
            published_after=converse_request.published_after,
            published_before=converse_request.published_before,
            sections_field="context.filters.sections",
            intent_vector=converse_request.intent_vector,
            intent_vector_field="context.intent_vector",
            input=converse_request.input,
            input_prefix=self.input_prefix,
            callback_url=converse_request.callback_url,
            callback_field="context.callback_url",
            idempotency_key=request.headers.get("Idempotency-Key"),
            fingerprint={k: v for k, v in converse_request.raw.items() if k != "auth"},
            protocol="ahp",
            path=request.path,
        )


def clarification_needed(session_id: str, question: str, options: list[str] | None, *, free_form: bool) -> JsonResponse:
    """AHP's ``clarification_needed`` body (§6.3)."""
    return JsonResponse(
        {
            "status": "clarification_needed",
            "session_id": session_id,
            "clarification": {"question": question, "options": options, "free_form": free_form},
        }
    )


def render_turn(turn: Turn, capability: Capability, fallback_from: str | None) -> JsonResponse:
    """A MODE2 turn as the AHP success or ``clarification_needed`` body (§6.2, §6.3)."""
    if turn.clarification is not None:
        clarification = turn.clarification
        return clarification_needed(
            turn.session_id, clarification.question, clarification.options, free_form=clarification.free_form
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


def render_call(result: calls.Result, capability: Capability, negotiated: Negotiated) -> tuple[int, dict[str, Any]]:
    """A MODE3 call's result as the AHP status and body (§6.2-§6.4, §10); an idempotent retry gets it again."""
    if isinstance(result, calls.Refused):
        error = result.error
        return error.status, {"status": "error", "code": error.code, "message": error.message, **error.details}
    if isinstance(result, calls.NeedsInput):
        return 200, {
            "status": "clarification_needed",
            "session_id": result.session_id,
            "clarification": {"question": result.question, "options": None, "free_form": True},
        }
    if isinstance(result, calls.Accepted):
        job = result.job
        body: dict[str, Any] = {
            "status": "accepted",
            "session_id": job.pk,
            "eta_seconds": job.eta_seconds,
            "poll": reverse("agent_handshake:converse_status", args=[job.pk]),
        }
        if job.callback_url:
            body["callback"] = {"method": "POST", "url": job.callback_url}
        return 202, body
    content_type, fallback = negotiated.content_type, negotiated.fallback_from
    body = {"status": "success"}
    if result.session_id is not None:
        body["session_id"] = result.session_id
    body["response"] = response_object(capability, result.outcome, content_type)
    body["meta"] = response_meta(capability, content_type, fallback, dict(state.snapshot().site_signals))
    return 200, body
