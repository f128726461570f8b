"""``POST /agent/converse`` (AHP §6): the conversational endpoint.

The order of work: refuse oversize bodies, parse and validate, authenticate, count the request (per API key;
without one, per client network and per ``requesting_agent`` from that network), find the capability, check its
auth and scope, negotiate the content type. A MODE3 capability continues in :mod:`.invoke`. A MODE2 one reads its
session (only its owner's: the API key, or the client network of an anonymous session), resolves a pending
clarification, rewrites a follow-up into a standalone query, checks the token budgets and answers (from the
answer cache when the same question was just answered), all without a transaction or lock; then, in a short
transaction with the session row locked, checks the turn limit again and records the turn. Every response, errors
included, is AHP JSON with the four ``X-RateLimit-*`` headers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from django.core.cache import caches
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from .. import content_signals, state
from ..concierge import limits as ratelimit
from ..concierge.answering import Clarification, ConverseContext, Reply, max_answer_tokens
from ..concierge.backends import get_answer_backend
from ..concierge.conversation import Owner, SessionError, load_session, new_session, standalone_query
from ..conf import app_settings
from ..identity import auth
from ..models import ConverseSession
from ..registry import Capability, capability_registry, content_registry
from ..retrieval.embeddings import EmbeddingUnavailable
from ..retrieval.hybrid import Filters
from ..retrieval.index import EmbeddingModelChanged
from . import invoke
from .errors import error_response, method_not_allowed
from .negotiation import UnsupportedType, negotiate
from .request import ConverseRequest, RequestError, parse_request

logger = logging.getLogger(__name__)


def converse_capabilities() -> list[Capability]:
    """Capabilities this endpoint answers: those with a handler, currently available."""
    return [capability for capability in capability_registry.available() if capability.handler is not None]


def _normalise(query: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", query.lower()).split())


class Rejected(Exception):
    """A request refused with an AHP error (raised inside a transaction, it records nothing)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def rate_limited(usage: ratelimit.Usage, message: str) -> JsonResponse:
    return error_response(429, "rate_limited", message, scope=usage.public_scope, retry_after=usage.retry_after)


def refused(counter: ratelimit.Counter, exc: auth.AuthError) -> JsonResponse:
    """401 for refused credentials, counted per IP (429 once that limit is hit)."""
    ip = counter.count_ip()
    if ip.exceeded:
        return rate_limited(ip, "Rate limit exceeded for this IP address.")
    return unauthorized(exc)


def unauthorized(exc: auth.AuthError) -> JsonResponse:
    response = error_response(exc.status, exc.code, exc.message)
    response.headers["WWW-Authenticate"] = 'Bearer realm="agent_handshake"'
    return response


@method_decorator(csrf_exempt, name="dispatch")
class ConverseView(View):
    http_method_names = ["post", "options"]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.counter = ratelimit.Counter(request)
        self.usages = self.counter.usages
        try:
            response = super().dispatch(request, *args, **kwargs)
        except Exception:
            logger.exception("The concierge failed on %s", request.path)
            response = error_response(500, "concierge_error", "The concierge failed; the error was logged.")
        return self.counter.headers(response)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return method_not_allowed(request.method or "", ["POST"])

    def post(self, request: HttpRequest) -> HttpResponse:
        limit = app_settings.MAX_REQUEST_BYTES
        too_large = error_response(413, "request_too_large", f"The request body is over the {limit}-byte cap.")
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not (declared.isascii() and declared.isdigit()):  # Django's request.body would fail on it (a 500)
            return error_response(400, "invalid_request", "Content-Length must be a number of bytes.")
        if int(declared) > limit:
            return too_large
        try:
            body = request.body
        except RequestDataTooBig:
            return too_large
        if len(body) > limit:
            return too_large
        try:
            converse_request = parse_request(body)
        except RequestError as exc:
            return error_response(400, exc.code, exc.message, **exc.extra)
        try:
            credentials = auth.authenticate(request, body, converse_request.raw.get("auth"))
        except auth.AuthError as exc:
            return refused(self.counter, exc)
        if credentials is None:
            ip = self.counter.count_ip()
            if ip.exceeded:
                return rate_limited(ip, "Rate limit exceeded for this IP address.")
        else:
            usage = self.counter.add(ratelimit.count_key(request, credentials.rate_key))
            if usage.exceeded:
                return rate_limited(usage, "Rate limit exceeded for this API key.")
        anonymous_name = converse_request.requesting_agent if credentials is None else ""
        agent = ratelimit.count_agent(request, anonymous_name) if anonymous_name else None
        if agent is not None:
            self.usages.append(agent)
            if agent.exceeded:
                return rate_limited(agent, "Rate limit exceeded for this agent identity.")
        capabilities = converse_capabilities()
        capability = next((c for c in capabilities if c.name == converse_request.capability), None)
        if capability is None:
            return error_response(
                400,
                "unknown_capability",
                f"The capability {converse_request.capability!r} is not supported.",
                available_capabilities=[c.name for c in capabilities],
            )
        if capability.requires_auth:
            if credentials is None:
                return unauthorized(auth.AuthError(f"The capability {capability.name!r} requires authentication."))
            if not credentials.key.allows(capability.scope):
                return error_response(
                    403,
                    "forbidden",
                    f"This API key does not have the scope {capability.scope!r} that {capability.name!r} requires.",
                )
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
            invocation = invoke.Call(request, body, converse_request, capability, credentials, negotiated, self.usages)
            return invocation.respond()
        owner = Owner(credentials.key if credentials else None, ratelimit.client_address(request))
        try:
            return self.converse(converse_request, capability, negotiated.content_type, negotiated.fallback_from, owner)
        except Rejected as rejected:
            return rejected.response
        except (EmbeddingUnavailable, EmbeddingModelChanged) as exc:
            logger.exception("Retrieval is unavailable")
            return error_response(503, "unavailable", f"Search is unavailable right now: {exc}")

    def converse(
        self,
        converse_request: ConverseRequest,
        capability: Capability,
        content_type: str,
        fallback_from: str | None,
        owner: Owner,
    ) -> HttpResponse:
        # The slow work (the query's embedding, the answer backend's call with its timeout and retries) runs on a
        # session read without a lock and outside any transaction; only recording the turn locks the row, briefly,
        # and checks again what a concurrent request may have changed meanwhile (see locked()).
        if converse_request.session_id:
            session = self.load(converse_request.session_id, owner)
        else:
            session = new_session(capability.name, converse_request.requesting_agent, owner)
        self.check_turns(session)

        query = converse_request.query
        filters = self.filters(converse_request)
        clarified = False
        pending = session.pending_clarification
        if converse_request.clarification and pending:
            choice = converse_request.clarification.strip().lower()
            clarified = True
            query = pending.get("query") or query
            if choice in pending.get("scopes", {}):
                filters = Filters(
                    models=pending["scopes"][choice],
                    content_types=filters.content_types,
                    published_after=filters.published_after,
                    published_before=filters.published_before,
                )
            else:
                query = f"{query} {converse_request.clarification}"
        elif converse_request.clarification:
            query = f"{query} {converse_request.clarification}"
            clarified = True
        standalone = standalone_query(query, session.turns) if not clarified else query

        network = ratelimit.network_of(owner.address)
        self.check_budgets(session, network)
        context = ConverseContext(
            capability=capability,
            query=standalone,
            original_query=converse_request.query,
            content_type=content_type,
            fallback_from=fallback_from,
            max_tokens=max_answer_tokens(converse_request.max_tokens),
            filters=filters,
            clarified=clarified,
        )
        cache_key = self.cache_key(context) if standalone == converse_request.query and not clarified else None
        cached = caches[app_settings.CACHE_ALIAS].get(cache_key) if cache_key else None
        if cached is not None:
            reply, from_cache = Reply(**cached), True
            reply.tokens_used = 0
        else:
            result = capability.handler(context)
            if isinstance(result, Clarification):
                return self.clarify(session, owner, result, query)
            reply, from_cache = result, False
            if cache_key and app_settings.ANSWER_CACHE_TIMEOUT != 0:
                caches[app_settings.CACHE_ALIAS].set(cache_key, reply.__dict__, app_settings.ANSWER_CACHE_TIMEOUT)
        ratelimit.add_daily_tokens(network, reply.tokens_used)  # spent, whether or not the turn is recorded

        turn = {
            "query": converse_request.query,
            "standalone_query": standalone,
            "answer": reply.answer[:1000],
            "sources": [{"title": s["title"], "url": s["url"]} for s in reply.sources],
            "tokens": reply.tokens_used,
        }
        with transaction.atomic():
            session = self.locked(session, owner)
            if session.pending_clarification == pending:  # answered or abandoned, unless replaced meanwhile
                session.pending_clarification = None
            session.turns = [*session.turns, turn]
            session.tokens_used += reply.tokens_used
            session.last_active_at = timezone.now()
            session.save()

        meta: dict[str, Any] = {
            "tokens_used": reply.tokens_used,
            "capability_used": capability.name,
            "mode": capability.mode,
            "cached": from_cache,
            "content_type": reply.content_type,
            "content_signals": reply.content_signals,
        }
        if fallback_from:
            meta["fallback_from"] = fallback_from
        if reply.guardrail:
            meta["guardrail"] = reply.guardrail
        response = JsonResponse(
            {"status": "success", "session_id": session.pk, "response": reply.response(), "meta": meta}
        )
        if reply.content_signals:
            response.headers[content_signals.HEADER] = content_signals.header_value(reply.content_signals)
        return response

    def load(self, session_id: str, owner: Owner, *, lock: bool = False) -> ConverseSession:
        try:
            return load_session(session_id, owner, lock=lock)
        except SessionError as exc:
            raise Rejected(error_response(exc.status, "invalid_request", exc.message, reason=exc.reason)) from exc

    def locked(self, session: ConverseSession, owner: Owner) -> ConverseSession:
        """``session`` read again under its row lock (in the caller's transaction) to record a turn: it may have
        been deleted, or filled up by concurrent requests, while this one was being answered."""
        if session._state.adding:
            return session  # started by this request: nobody else can see it yet
        session = self.load(session.pk, owner, lock=True)
        self.check_turns(session)
        return session

    def check_turns(self, session: ConverseSession) -> None:
        if len(session.turns) >= app_settings.SESSION_MAX_TURNS:
            raise Rejected(
                error_response(
                    429,
                    "rate_limited",
                    f"This session has had its {app_settings.SESSION_MAX_TURNS} turns; start a new session.",
                    scope="session",
                    retry_after=None,
                )
            )

    def filters(self, converse_request: ConverseRequest) -> Filters:
        models: list[str] = []
        sections = {config.get_section().lower(): config.label for config in content_registry}
        for name in converse_request.sections:
            label = sections.get(name.lower()) or name.lower()
            try:
                models.append(content_registry.get_config_by_label(label).label)
            except LookupError as exc:
                raise Rejected(
                    error_response(
                        400,
                        "invalid_request",
                        f"context.filters.sections: unknown section {name!r}.",
                        fields=["context.filters.sections"],
                        available_sections=sorted(sections),
                    )
                ) from exc
        return Filters(
            models=models,
            content_types=converse_request.content_types,
            published_after=converse_request.published_after,
            published_before=converse_request.published_before,
        )

    def check_budgets(self, session: ConverseSession, network: str) -> None:
        if get_answer_backend().name == "extractive":
            return  # budgets count model tokens; extractive answers spend none
        budget = ratelimit.session_budget("authenticated" if session.api_key_id else "unauthenticated")
        if budget and session.tokens_used >= budget:
            raise Rejected(
                error_response(
                    429,
                    "rate_limited",
                    "Token budget for this session has been exhausted.",
                    scope="session_tokens",
                    retry_after=None,
                )
            )
        daily = app_settings.DAILY_TOKEN_BUDGET_PER_IP
        if daily and ratelimit.daily_tokens_used(network) >= daily:
            wait = ratelimit.seconds_until_tomorrow()
            response = error_response(
                429,
                "rate_limited",
                "Daily token budget for this IP address is exhausted.",
                scope="ip",
                retry_after=wait,
            )
            response.headers["Retry-After"] = str(wait)
            raise Rejected(response)

    def cache_key(self, context: ConverseContext) -> str:
        parts = [
            context.capability.name,
            _normalise(context.query),
            context.content_type,
            context.fallback_from,
            context.max_tokens,
            sorted(context.filters.models),
            sorted(context.filters.content_types),
            str(context.filters.published_after),
            str(context.filters.published_before),
            get_answer_backend().name,
            state.snapshot().token,
        ]
        digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
        return f"agent_handshake:answer:{digest}"

    def clarify(self, session: ConverseSession, owner: Owner, clarification: Clarification, query: str) -> HttpResponse:
        with transaction.atomic():
            session = self.locked(session, owner)
            session.pending_clarification = {
                "question": clarification.question,
                "options": clarification.options,
                "scopes": clarification.scopes,
                "query": query,
            }
            session.last_active_at = timezone.now()
            session.save()
        return JsonResponse(
            {
                "status": "clarification_needed",
                "session_id": session.pk,
                "clarification": {
                    "question": clarification.question,
                    "options": clarification.options,
                    "free_form": clarification.free_form,
                },
            }
        )
