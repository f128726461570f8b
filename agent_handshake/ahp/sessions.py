"""Converse sessions (AHP §6.5): lookup with expiry, turn limits, and rewriting follow-up questions.

A follow-up such as "and the second one?" or "how much is it?" means little on its own; before retrieval it is
rewritten into a standalone query from the previous turn (its query and the sources it cited). The rules are
deterministic, so they work the same with or without an LLM configured.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from django.utils import timezone

from ..conf import app_settings
from ..models import ConverseSession


class SessionError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


def idle_timeout() -> datetime.timedelta:
    return datetime.timedelta(seconds=app_settings.SESSION_IDLE_SECONDS)


def load_session(session_id: str) -> ConverseSession:
    """The live session ``session_id``; :class:`SessionError` if it is unknown, expired or full."""
    session = ConverseSession.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        raise SessionError(
            404, f"Unknown session {session_id!r}. Start a new one with session_id null.", "unknown_session"
        )
    if timezone.now() - session.last_active_at > idle_timeout():
        session.delete()
        raise SessionError(
            410,
            f"Session {session_id!r} expired after {app_settings.SESSION_IDLE_SECONDS // 60} minutes without a "
            "request. Start a new one with session_id null.",
            "session_expired",
        )
    return session


def new_session(capability: str, requesting_agent: str, client_ip: str | None) -> ConverseSession:
    return ConverseSession(
        capability=capability,
        requesting_agent=requesting_agent[:128],
        client_ip=client_ip,
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
