"""Converse sessions (AHP §6.5): lookup with expiry and ownership, and rewriting follow-up questions.

A follow-up such as "and the second one?" or "how much is it?" means little on its own; before retrieval it is
rewritten into a standalone query from the previous turn (its query and the sources it cited). The rules are
deterministic, so they work the same with or without an LLM configured.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from ..conf import app_settings
from ..models import ApiKey, ConverseSession
from .limits import network_of


class SessionError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


@dataclass(frozen=True)
class Owner:
    """Who is asking: the API key of an authenticated request, else the client's address.

    A session belongs to whoever started it: the key, or for an anonymous session the client's network
    (:func:`~.ratelimit.network_of`). A key never continues an anonymous session, nor the reverse.
    """

    api_key: ApiKey | None
    address: str | None

    def owns(self, session: ConverseSession) -> bool:
        if self.api_key is not None or session.api_key_id is not None:
            return self.api_key is not None and session.api_key_id == self.api_key.pk
        return network_of(session.client_ip) == network_of(self.address)


def idle_timeout() -> datetime.timedelta:
    return datetime.timedelta(seconds=app_settings.SESSION_IDLE_SECONDS)


def unknown_session(session_id: str) -> SessionError:
    return SessionError(
        404, f"Unknown session {session_id!r}. Start a new one with session_id null.", "unknown_session"
    )


def load_session(session_id: str, owner: Owner, *, lock: bool = False) -> ConverseSession:
    """The live session ``session_id`` of ``owner`` (row-locked with ``lock``, inside a transaction);
    :class:`SessionError` if it is unknown, expired or someone else's (404, as if unknown: nothing tells a
    stranger that the session exists)."""
    sessions = ConverseSession.objects.select_for_update() if lock else ConverseSession.objects
    session = sessions.filter(pk=session_id).first()
    if session is None or not owner.owns(session):
        raise unknown_session(session_id)
    if timezone.now() - session.last_active_at > idle_timeout():
        session.delete()
        raise SessionError(
            410,
            f"Session {session_id!r} expired after {app_settings.SESSION_IDLE_SECONDS // 60} minutes without a "
            "request. Start a new one with session_id null.",
            "session_expired",
        )
    return session


def new_session(capability: str, requesting_agent: str, owner: Owner) -> ConverseSession:
    return ConverseSession(
        capability=capability,
        requesting_agent=requesting_agent[:128],
        client_ip=owner.address,
        api_key=owner.api_key,
        last_active_at=timezone.now(),
    )


def delete_expired_sessions() -> int:
    deleted, _ = ConverseSession.objects.filter(last_active_at__lt=timezone.now() - idle_timeout()).delete()
    return deleted


ORDINALS = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
    "fifth": 5, "5th": 5, "last": -1, "latter": -1, "former": 1,
}  # fmt: skip
ORDINAL = re.compile(
    r"\b(?:the\s+)?(?P<ordinal>first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last|latter|former)"
    r"(?:\s+(?:one|item|result|source|link|post|article|video|page|product))?\b"
    r"|\b(?:number|no\.?|#)\s*(?P<number>[1-9])\b",
    re.IGNORECASE,
)
PRONOUNS = re.compile(r"\b(it|its|that|this|those|these|they|them|their|one)\b", re.IGNORECASE)
FILLER = re.compile(r"^\s*(and|so|also|then|ok|okay|what about|how about)\b[\s,]*", re.IGNORECASE)


def _clean(text: str) -> str:
    return " ".join(re.sub(r"[?!.,;:]+", " ", text).split())


def standalone_query(query: str, turns: list[dict[str, Any]]) -> str:
    """``query`` rewritten to stand on its own, given the session's previous turns (newest last)."""
    if not turns:
        return query
    previous = turns[-1]
    sources = previous.get("sources") or []
    match = ORDINAL.search(query)
    if match and sources:
        index = int(match.group("number")) if match.group("number") else ORDINALS[match.group("ordinal").lower()]
        position = index - 1 if index > 0 else len(sources) + index
        if 0 <= position < len(sources):
            rest = _clean(FILLER.sub("", query[: match.start()] + " " + query[match.end() :]))
            rest = _clean(PRONOUNS.sub(" ", rest))
            return f"{sources[position]['title']} {rest}".strip()
    words = _clean(query).split()
    if len(words) <= 6 and (PRONOUNS.search(query) or FILLER.match(query)):
        rest = _clean(PRONOUNS.sub(" ", FILLER.sub("", query)))
        topic = sources[0]["title"] if sources else previous.get("standalone_query", "")
        return f"{topic} {rest}".strip()
    return query
