"""NLWeb v0.54 over HTTP: ``POST /ask`` and ``POST /await``, a thin front door to the concierge.

``/ask`` is a :class:`~agent_handshake.concierge.conversation.Question` to ``content_search`` (narrowed by
``site``, ``itemType``, price and dates), or, with our ``query.capability`` extension, the invocation of a MODE3
capability (what every result's ``actions[]`` posts). The concierge's answer is rendered as NLWeb: schema.org
``results`` (or ``content`` + ``structuredData``), an Elicitation for a clarification or missing input, a
Promise for an accepted async job, a Failure for every error. ``/await`` checks in on that job or cancels it.

Streaming (``Accept: text/event-stream`` or ``prefer.streaming``): ``start`` (the ``_meta``), one ``result``
per ranked item as soon as retrieval has ranked them (before any answer is written; for ``chatgpt_app`` each
followed by a ``content`` event, the item in words), ``content`` (the summary, when asked for: last in a stream,
first in a JSON answer's ``content``), then ``complete`` (the full ``_meta``); a failure half-way is a ``failure``
event, and the stream ends with ``end``. A capability call and ``/await`` answer at once, so their streams are
the whole answer's events (:func:`body_events`): ``start``, the elicitation, the promise, each result (then the
summary's ``content``) or a job's failure, ``complete``, ``end``. Whatever can be refused (bad input, limits,
credentials, an unknown conversation's turn limit...) is refused before the stream starts, with a JSON Failure and
its 4xx status.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from django.http import HttpResponseBase
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response

from .. import content_signals, state
from ..concierge import documents, errors, search_scope
from ..concierge.answering import Ranked
from ..concierge.conversation import Question, Turn, converse_steps
from ..concierge.invocation import authorize
from ..conf import app_settings
from ..frontdoor import FrontDoorView, described, domain_error
from ..hosts import base_url
from ..registry import capability_registry
from ..sse import accepts_event_stream, event, event_stream
from . import render
from .actions import actions_for
from .invoking import await_job, invoke_from_ask, owner_of
from .openapi import ASK, AWAIT
from .request import Ask, parse_ask, parse_await
from .schema_org import item

logger = logging.getLogger(__name__)


#: ``query.site`` for every corpus, as the upstream reference implementation names them all.
EVERY_SITE = "all"


def hostname(site: str) -> str | None:
    """The host a ``query.site`` value or a URL names (a domain, ``host:port`` or a URL), in lower case and without
    ``www.``; None for a value that is no host."""
    try:
        host = urlsplit(site.strip() if "//" in site else f"//{site.strip()}").hostname
    except ValueError:  # an unclosed IPv6 bracket
        return None
    return host.rstrip(".").removeprefix("www.") if host else None


def names_this_site(request: Request, sites: list[str]) -> bool:
    """Whether ``query.site`` names this site's corpus: by the host the request came to, ``BASE_URL``'s host, the
    site profile's name (as the manifest names the site), or ``all``."""
    hosts = {hostname(request.get_host()), hostname(app_settings.BASE_URL)} - {None}
    name = state.snapshot().name.strip().casefold()
    return any(site.strip().casefold() in (EVERY_SITE, name) or hostname(site) in hosts for site in sites)


class NLWebView(FrontDoorView):
    http_method_names = ["post", "options"]

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return Response(render.failure(error), status=error.status)


class AskView(NLWebView):
    """``POST /ask`` (see the module docstring)."""

    @described(**ASK)
    def post(self, request: Request) -> HttpResponseBase:
        ask = parse_ask(request.data)
        if ask.capability:
            return streamed_if_asked(request, invoke_from_ask(self, request, ask), ask.streaming)
        capability = capability_registry.get("content_search")
        if capability is None or capability.handler is None or not capability.is_available():
            raise errors.Unavailable("This site has no content to search yet.")
        authorize(capability, request.auth)  # a site's own content_search may be members-only (a scope)
        filters, warnings = self.filters(ask)
        question = Question(
            capability=capability,
            text=ask.text,
            session_id=ask.conversation_id,
            filters=filters,
            previous=ask.previous,
            strict_session=False,
            text_may_clarify=True,
            write_answer=ask.summarize,
        )
        steps = converse_steps(question, owner_of(request))
        # Run to the first event here, so that whatever is refused is a JSON Failure with its status.
        try:
            first: Ranked | None = next(steps)
            turn = None
        except StopIteration as done:
            first, turn = None, done.value
        base = base_url(request)
        if ask.streaming or accepts_event_stream(request._request):
            return event_stream(request, self.stream(self.events(ask, steps, first, turn, base, warnings)))
        if turn is None:
            turn = _finish(steps)
        return self.respond(ask, turn, base, warnings)

    # --- filters ----------------------------------------------------------------------------------------------

    def filters(self, ask: Ask) -> tuple[search_scope.Filters, list[str]]:
        """The retrieval filters ``query`` asks for, and warnings for the constraints this site cannot apply."""
        if ask.sites and not names_this_site(self.request, ask.sites):
            # §3.1: site says "which corpora must be searched"; another site's has nothing here.
            name = state.snapshot().name
            this = urlsplit(base_url(self.request)).netloc + (f" ({name})" if name else "")
            return search_scope.nothing(), [
                f"query.site: this agent searches one site, {this}, not {', '.join(ask.sites)[:200]}."
            ]
        scope = search_scope.narrowed(
            item_type=ask.item_type,
            price=(ask.price.low, ask.price.high) if ask.price is not None else None,
            published_after=ask.published_after,
            published_before=ask.published_before,
        )
        warnings: list[str] = []
        if scope.type_unknown:
            types = search_scope.item_types()
            warnings.append(f"query.itemType: this site has no {ask.item_type}; its types are {', '.join(types)}.")
        if scope.unpriced:
            warnings.append("query.price: nothing on this site that matches the query has a price.")
        return scope.filters, warnings

    # --- rendering ----------------------------------------------------------------------------------------------

    def items(self, document_ids: list[int], base: str) -> list[dict[str, Any]]:
        ordered = documents.in_order(document_ids)
        actions = actions_for(ordered, base + reverse("agent_handshake:nlweb_ask"))
        results = []
        for document in ordered:
            result = item(document, base)
            if document.pk in actions:
                result["actions"] = actions[document.pk]
            results.append(result)
        return results

    def respond(self, ask: Ask, turn: Turn, base: str, warnings: list[str]) -> Response:
        if turn.clarification is not None:
            return Response(clarification_body(turn))
        reply = turn.reply
        assert reply is not None
        body = render.answer(
            self.items(reply.document_ids, base),
            response_format=ask.response_format,
            conversation_id=turn.session_id,
            summary=reply.answer if ask.summarize else None,
            **answer_meta(reply, warnings),
        )
        response = Response(body)
        if reply.content_signals:
            response.headers[content_signals.HEADER] = content_signals.header_value(reply.content_signals)
        return response

    @staticmethod
    def stream(events: Iterator[bytes]) -> Iterator[bytes]:
        """``events``, then ``end``; an exception half-way becomes a ``failure`` event."""
        try:
            yield from events
        except Exception as exc:  # the status is sent: a failure is an event now
            yield event("failure", render.failure(domain_error(exc)))
        yield event("end", {"message": "done"})

    def events(
        self,
        ask: Ask,
        steps: Iterator,
        first: Ranked | None,
        turn: Turn | None,
        base: str,
        warnings: list[str],
    ) -> Iterator[bytes]:
        if turn is not None and turn.clarification is not None:
            yield from body_events(clarification_body(turn))
            return
        # The conversation is known once the turn is recorded: ``complete`` carries it (the id the agent sent may
        # have started a new one).
        yield event("start", {"_meta": render.meta("answer", streaming=True)})
        ranked = first.document_ids if first is not None else (turn.reply.document_ids if turn and turn.reply else [])
        total = 0
        for index, result in enumerate(self.items(ranked, base)):
            yield event("result", {"index": index, "item": result})
            if ask.response_format == "chatgpt_app":  # its item in words, as the JSON answer's ``content`` has it
                yield event("content", render.item_content(result))
            total += 1
        if turn is None:
            turn = _finish(steps)
        reply = turn.reply
        assert reply is not None
        head = render.meta("answer", turn.session_id, response_format=ask.response_format, total_items=total)
        if ask.summarize and reply.answer:
            yield event("content", {"type": "text", "text": reply.answer})
            head["summary"] = reply.answer
        yield event("complete", {"_meta": {**head, **answer_meta(reply, warnings)}})


def streamed_if_asked(request: Request, response: Response, streaming: bool = False) -> HttpResponseBase:
    """``response`` (an answer, an elicitation, a promise or a job's failure) as the events that deliver its body
    when the client asked for a stream (§8.4), with its status and headers; a refusal (4xx) stays a JSON Failure,
    as a question's does."""
    if response.status_code >= 400 or not (streaming or accepts_event_stream(request._request)):
        return response
    stream = event_stream(request, AskView.stream(body_events(response.data)), status=response.status_code)
    for name, value in response.headers.items():
        if name.lower() not in ("content-type", "content-length"):
            stream.headers[name] = value
    return stream


def body_events(body: dict[str, Any]) -> Iterator[bytes]:
    """The events of a whole response body, in the order and shape a question's stream has them: ``start`` (the
    ``_meta``), then the elicitation, the promise or the failure, or each result (with its ``content`` for
    ``chatgpt_app``) and the summary's ``content`` when there is one, then ``complete`` (the ``_meta`` again; a
    failure ends the stream instead)."""
    head = body["_meta"]
    yield event("start", {"_meta": {**head, "streaming": True}})
    if "error" in body:
        yield event("failure", body)
        return
    for kind in ("elicitation", "promise"):
        if kind in body:
            yield event(kind, body[kind])
            break
    else:
        items = body.get("results", body.get("structuredData", []))
        for index, result in enumerate(items):
            yield event("result", {"index": index, "item": result})
            if head.get("response_format") == "chatgpt_app":
                yield event("content", render.item_content(result))
        if head.get("summary"):  # the last ``content``, as in a question's stream (the first of a JSON answer's)
            yield event("content", {"type": "text", "text": head["summary"]})
    yield event("complete", {"_meta": head})


def _finish(steps: Iterator) -> Turn:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def answer_meta(reply: Any, warnings: list[str]) -> dict[str, Any]:
    extra: dict[str, Any] = {"content_signals": reply.content_signals}
    if reply.guardrail:
        extra["guardrail"] = reply.guardrail
    if warnings:
        extra["warnings"] = warnings
    return extra


def clarification_body(turn: Turn) -> dict[str, Any]:
    clarification = turn.clarification
    assert clarification is not None
    question: dict[str, Any] = {"id": "scope", "text": clarification.question}
    if clarification.options:
        question.update(type="single_select", options=list(clarification.options))
    else:
        question["type"] = "text"
    return render.elicitation(clarification.question, [question], turn.session_id)


class AwaitView(NLWebView):
    """``POST /await``: check in on a Promise's job, or cancel it; its ``prefer`` is read as ``/ask``'s is."""

    earns_trust = False  # a poll (or a cancel): the /ask that started the job earned what it did

    @described(**AWAIT)
    def post(self, request: Request) -> HttpResponseBase:
        wait = parse_await(request.data)
        return streamed_if_asked(request, await_job(self, request, wait), wait.streaming)
