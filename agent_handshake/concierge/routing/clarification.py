"""Asking which capability was meant, in a session, and reading the answer on the next turn.

:func:`offer` keeps the candidates' names in a session and :func:`resume` reads the choice on the next turn against
that list, not against the capabilities offered by then: a number counts the options as they were listed, and an
option withdrawn since is an unknown capability, not the one that took its place (:func:`chosen_option`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from ...conf import app_settings
from ...insights import recording
from ...registry import Capability
from .. import errors
from ..conversation import Owner, SessionError, load_session, new_session
from .choosing import choose, numbered
from .decision import Route

#: The ``pending_clarification`` of a session whose next turn chooses among routed capabilities.
PENDING_KIND = "routing"


@dataclass(frozen=True)
class Offer:
    """A clarification listing routed candidates, kept in the session ``session_id``."""

    session_id: str
    question: str
    options: list[str]


def offer(route: Route, query: str, requesting_agent: str, owner: Owner) -> Offer:
    """Keep ``route``'s candidates (or, when nothing fitted, the best few) in a new session and ask which one."""
    candidates = route.candidates[:4]
    listed = "; ".join(f"{number}. {c.name}: {c.intent_text}" for number, c in enumerate(candidates, 1))
    if route.ranked and route.ranked[0].score >= app_settings.ROUTING_MIN_SCORE:
        question = f"Several capabilities fit this request. Which one did you mean? {listed}"
    else:
        question = f"No capability clearly fits this request. Did you mean one of these? {listed}"
    session = new_session("", requesting_agent, owner)
    session.pending_clarification = {
        "kind": PENDING_KIND,
        "question": question,
        "options": [c.name for c in candidates],
        "query": query,
    }
    session.save()
    recording.note(outcome=recording.Outcome.CLARIFICATION)
    return Offer(session.pk, question, [c.name for c in candidates])


def resume(
    session_id: str, owner: Owner, answer: str | None, capabilities: Sequence[Capability]
) -> tuple[Capability | None, bool]:
    """The capability a continuing session is for, and whether ``answer`` chose it: the choice ``answer`` makes
    among the candidates a routing clarification offered (recorded on the session), or the capability the session
    already has. None when the session has neither (the request is routed afresh). An answer that chooses no option
    is :class:`~.errors.UnknownCapability` (:func:`chosen_option`), the session left as it was; an unknown, expired or
    foreign session is :class:`~.errors.NotFound`/:class:`~.errors.Gone`."""
    with transaction.atomic():
        try:
            session = load_session(session_id, owner, lock=True)
        except SessionError as exc:
            error = errors.Gone if exc.status == 410 else errors.NotFound
            raise error(exc.message, reason=exc.reason) from exc
        offered = {capability.name: capability for capability in capabilities}
        pending = session.pending_clarification or {}
        if pending.get("kind") == PENDING_KIND:
            if not answer:
                return None, False
            chosen = chosen_option(answer, pending.get("options", []), offered)
            session.capability = chosen.name
            session.pending_clarification = None
            session.last_active_at = timezone.now()
            session.save()
            return chosen, True
        return offered.get(session.capability), False


def chosen_option(answer: str, options: Sequence[str], offered: dict[str, Capability]) -> Capability:
    """The capability ``answer`` chooses among ``options``, the names a clarification listed, as they were listed:
    a number counts them on that list, not on what is ``offered`` now (which may have lost one since, or gained one).
    :class:`~.errors.UnknownCapability` when it chooses none of them (:func:`choose`), when the choice is an option
    no longer offered, or when one is gone and the answer is free text: ranked among those left, it would get a
    capability that an answer meaning the gone one did not choose. The clarification stays open for another
    answer."""
    gone = [name for name in options if name not in offered]
    if not gone:
        chosen = choose(answer, [offered[name] for name in options])
        if chosen is not None:
            return chosen
        listed = "; ".join(f"{number}. {name}" for number, name in enumerate(options, 1))
        raise errors.UnknownCapability(
            f"The answer chooses none of the options ({listed}). Choose one by its number or name, or send the "
            "request without this session.",
            fields=["clarification"],
            available_capabilities=list(offered),
        )
    index = numbered(answer, len(options))
    lowered = answer.lower()
    named = [
        name
        for name in options
        if name in lowered or (name in offered and offered[name].intent_text.lower() in lowered)
    ]
    picked = options[index] if index is not None else named[0] if len(named) == 1 else None
    if picked is not None and picked in offered:
        return offered[picked]
    if picked is not None:
        message = f"The capability {picked!r} you chose is no longer offered."
    else:
        listed = ", ".join(repr(name) for name in gone)
        message = f"Since this question was asked, {listed} {'is' if len(gone) == 1 else 'are'} no longer offered."
    raise errors.UnknownCapability(
        f"{message} Choose another option by its number or name, or send the request without this session.",
        fields=["clarification"],
        available_capabilities=list(offered),
    )
