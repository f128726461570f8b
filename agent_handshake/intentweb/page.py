"""``/intent-ui/`` (IntentWeb §3.1): the same intents for people, in a page, driven by the same backend.

The page (no build step: one template, its script inline) talks to ``POST /intent-ui/message``, which wraps what
the person typed or filled in into an IntentWeb envelope (the hash, a nonce, the time) and hands it to
:class:`~.views.IntentView`'s own pipeline: the same validation, routing, collection, execution and signed
answer. The page shows the site's message, turns ``required_information`` into a form (each field from the
capability's ``input_schema``: a select for an enum, a date or time picker, an email field...), the ``options``
of a clarification into buttons, and the result.

Who acts: people have no API key. The page acts with a key of the site's own (an ``AgentClient`` named
"Intent page (this site)", created on first use) whose scopes are ``INTENT_UI_SCOPES``: empty by default, so the
page offers only what needs no key until the site owner opts in (the demo allows bookings). Because every visitor
shares that key, the page's limits count per client address, and an interaction can be continued only from the
browser session that started it. A message is routed among what the page lists alone (:class:`PageTurn`): one that
fits only something else is told that it is not available on this page and offered what is. Requests are
CSRF-checked like any form of the site.
"""

from __future__ import annotations

import datetime
import re
import secrets
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views import View
from rest_framework.authentication import CSRFCheck
from rest_framework.request import Request
from rest_framework.response import Response

from ..concierge import calls, errors
from ..concierge import limits as ratelimit
from ..concierge.invocation import extract_input
from ..conf import app_settings
from ..identity.auth import Credentials
from ..identity.own_keys import own_key
from ..registry import INTENTWEB_VERSION, Capability
from . import attribution
from .flows import Turn, offered
from .views import IntentView, now_iso

CLIENT_NAME = "Intent page (this site)"
SESSION_KEY = "agent_handshake_interactions"
MAX_SESSION_INTERACTIONS = 50


def page_credentials() -> Credentials:
    """The site's own key for the page, with ``INTENT_UI_SCOPES`` (kept in step with the setting)."""
    return Credentials(own_key(CLIENT_NAME, "intent page", app_settings.INTENT_UI_SCOPES), "intent_page")


def page_may(capability: Capability) -> bool:
    """Whether the page's key may use ``capability`` (what :meth:`ApiKey.allows` says of ``INTENT_UI_SCOPES``): the
    page lists only those, not what a person would choose and then be refused for lack of an API key."""
    scopes = app_settings.INTENT_UI_SCOPES
    return not capability.requires_auth or capability.scope is None or "*" in scopes or capability.scope in scopes


class PageCall(calls.Call):
    """A capability call from the page: its own limit (``rate_limit``, else ``ACTION_RATE_LIMIT``) counts per client
    address, like the page's requests. Counted for the page's key, which every visitor shares, one visitor's
    bookings used up every visitor's budget."""

    def counted_as(self) -> str:
        # Per address as an anonymous caller's: the same person through /intent gets no second budget.
        return ratelimit.network_of(self.address)


class PageTurn(Turn):
    """A message from the page: routed, clarified and continued among the capabilities the page lists
    (:func:`page_may`) alone. Routed over every capability, a person's "Can someone call me back?" went to one the
    page's key may not use, and the person, who has no key, was refused for lacking a scope."""

    call_class = PageCall
    not_reachable_lead = "That is not available on this page."

    def reachable(self) -> list[Capability]:
        return [capability for capability in offered() if page_may(capability)]

    def read(self, capability: Capability, text: str, asked: list[str]) -> dict[str, Any]:
        """As an agent's, and a day a person names in words in the request they type ("tomorrow", "next Friday"),
        for the capability's one date field (:func:`day_named`). An agent states dates as YYYY-MM-DD, for its
        user's calendar, which the site cannot know; a person on the site's own page means the site's. Only the
        request is read so: the page's form asks for a date with a date picker, and its other answers ("Name: Ada
        Tuesday", "today@example.com") name no day."""
        found = super().read(capability, text, asked)
        properties = (capability.input_schema or {}).get("properties", {})
        dates = [name for name, spec in properties.items() if isinstance(spec, dict)
                 and spec.get("format") == "date" and spec.get("type", "string") == "string"]  # fmt: skip
        if self.envelope.flow_type != "intent_request" or len(dates) != 1 or dates[0] in found:
            return found
        named = day_named(text, timezone.localdate())
        if named is not None:
            words, day = named
            found[dates[0]] = day.isoformat()
            self.readings.append(f"I took “{words}” as {day:%A} {day.day} {day:%B %Y}.")
        return found

    def given(self, capability: Capability) -> dict[str, Any]:
        """The form's values, which are what the person typed (its script sends integers as numbers, nothing else):
        a field whose input is not text (a list of lines, a number, yes or no) is read from that text as the
        capability reads a message, else as its JSON type plainly says. Taken as they came, they were refused for
        their type and asked for again, however often the person answered."""
        properties = (capability.input_schema or {}).get("properties", {})
        # Not Turn.given's refusal of a JSON type the field does not take: the person typed text, and what still is
        # not the field's type is asked for again.
        given = dict(self.envelope.collected)
        for name, value in given.items():
            spec = properties.get(name)
            if not isinstance(value, str) or not isinstance(spec, dict) or spec.get("type", "string") == "string":
                continue
            read = extract_input(capability, value).get(name)
            given[name] = read if read is not None else plainly(spec.get("type"), value.strip())
        return given


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: The words for a day a person may type: alone, not inside a word, an address or a name with a dot or hyphen.
DAY_WORDS = re.compile(
    r"(?<![\w@.+-])(?:(?:the\s+)?day\s+after\s+tomorrow|today|tonight|tomorrow|"
    rf"(?:(?:this|next|coming|on)\s+)?(?:{'|'.join(WEEKDAYS)}))(?![\w@.-])",
    re.IGNORECASE,
)


def day_named(text: str, today: datetime.date) -> tuple[str, datetime.date] | None:
    """The day ``text`` names in words, counted from ``today``, with the words, or None if it names none or more than
    one: "today" (or "tonight"), "tomorrow", "the day after tomorrow", and a weekday, alone or after "on", "this",
    "next" or "coming": the first such day after today ("next Friday" on a Wednesday is in two days, as "Friday"
    is; the answer says which day it took)."""
    days: dict[datetime.date, str] = {}
    for match in DAY_WORDS.finditer(text):
        words = " ".join(match.group(0).split())
        last = words.split()[-1].lower()
        if last in WEEKDAYS:
            ahead = (WEEKDAYS.index(last) - today.weekday()) % 7 or 7
        elif words.lower().endswith("after tomorrow"):
            ahead = 2
        else:
            ahead = 1 if last == "tomorrow" else 0
        days.setdefault(today + datetime.timedelta(days=ahead), words)
    if len(days) != 1:
        return None
    ((day, words),) = days.items()
    return words, day


def plainly(kind: Any, text: str) -> Any:
    """``text`` as a value of the JSON type ``kind`` where it plainly is one ("12", "2.5", "yes"), else itself."""
    if kind in ("integer", "number") and re.fullmatch(r"-?\d{1,15}", text):
        return int(text)
    if kind == "number" and re.fullmatch(r"-?\d{1,15}\.\d{1,15}", text):
        return float(text)
    if kind == "boolean" and text.lower() in ("yes", "no", "true", "false"):
        return text.lower() in ("yes", "true")
    return text


class IntentPageView(View):
    """``GET /intent-ui/``."""

    http_method_names = ["get", "head"]

    def get(self, request: HttpRequest) -> HttpResponse:
        capabilities = [
            {
                "name": capability.name,
                "intent": capability.intent_text,
                "description": capability.description,
                "examples": list(capability.examples[:2]),
                "input_schema": capability.input_schema or {},
            }
            for capability in offered()
            if page_may(capability)
        ]
        # The page's one inline script runs by a nonce new with each response (Django has none before 6.0): the
        # policy forbids every other inline script, one injected into the page included.
        nonce = secrets.token_urlsafe(18)
        context = {
            "capabilities": capabilities,
            "message_url": reverse("agent_handshake:intent_ui_message"),
            "csrf_token": get_token(request),
            "script_nonce": nonce,
        }
        response = render(request, "agent_handshake/intent_ui.html", context)
        response.headers["Content-Security-Policy"] = (
            f"default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'"
        )
        return response


class IntentPageMessageView(IntentView):
    """``POST /intent-ui/message``: ``{"interaction_id"?, "message", "collected_information"?, "close"?}`` from the
    page, answered with the site's signed envelope (see the module docstring)."""

    authentication_classes: list = []
    turn_class = PageTurn
    openapi_inspector = None  # the page's own endpoint, not an API for agents: not in /openapi.json

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        reason = CSRFCheck(lambda _: None).process_view(request._request, None, (), {})
        if reason:
            raise errors.Forbidden(f"CSRF check failed: {reason}", code="csrf_failed")
        super().initial(request, *args, **kwargs)

    def count(self, request: Request, *, again: bool = False) -> None:
        """Per client address: every visitor shares the page's key."""
        usage = self.counter.count_ip()
        if usage.exceeded:
            raise errors.RateLimited(
                "Rate limit exceeded for this IP address.", scope=usage.public_scope, retry_after=usage.retry_after
            )

    def post(self, request: Request) -> Response:  # type: ignore[override]
        data = request.data if isinstance(request.data, dict) else {}
        message = data.get("message")
        if not isinstance(message, str):
            raise errors.InvalidInput("message must be text.", fields=["message"])
        close = data.get("close", False)
        if not isinstance(close, bool):  # "false" is not false
            raise errors.InvalidInput("close must be true or false.", fields=["close"])
        collected = data.get("collected_information") or {}
        if not isinstance(collected, dict):
            raise errors.InvalidInput("collected_information must be an object.", fields=["collected_information"])
        session = getattr(request._request, "session", None)
        if session is None:
            raise errors.Unavailable(
                "The intent page needs Django's sessions (django.contrib.sessions and SessionMiddleware).",
                code="sessions_missing",
            )
        mine: list[str] = list(session.get(SESSION_KEY, []))
        interaction_id = data.get("interaction_id")
        if interaction_id is None:
            interaction_id = "page-" + secrets.token_urlsafe(18)
            flow_type = "intent_request"
            kept = mine[-(MAX_SESSION_INTERACTIONS - 1) :]
            for forgotten in mine[: len(mine) - len(kept)]:
                session.pop(f"{SESSION_KEY}:{forgotten}", None)  # its hash goes with it: the session stays bounded
            mine = [*kept, interaction_id]
            session[SESSION_KEY] = mine
        elif not isinstance(interaction_id, str) or interaction_id not in mine:
            raise errors.Forbidden("This interaction was not started in this browser.", code="interaction_in_use")
        else:
            flow_type = "error" if close else "information_response"
        envelope: dict[str, Any] = {
            "protocol_version": INTENTWEB_VERSION,
            "flow_type": flow_type,
            "message": message,
            "interaction_id": interaction_id,
        }
        query_hash = session.get(f"{SESSION_KEY}:{interaction_id}")
        if query_hash is None:
            query_hash = attribution.query_hash(envelope)
            session[f"{SESSION_KEY}:{interaction_id}"] = query_hash
        moment = now_iso()
        envelope["attribution"] = {
            "query_hash": query_hash,
            "nonce": secrets.token_urlsafe(18),
            "timestamp": moment,
            "chain": [],
        }
        envelope["timestamp"] = moment
        if collected:
            envelope["collected_information"] = collected
        request.auth = page_credentials()
        return self.process(request, envelope)
