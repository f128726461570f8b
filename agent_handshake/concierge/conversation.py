"""Conversations: a question's turn in a session, for every front door.

:func:`converse` takes a :class:`Question` (capability, text, session, clarification, negotiated type,
filters) from any front door and returns a :class:`Turn`, or raises one of :mod:`.errors`. It reads the session
(only its owner's: the API key, or the client network of an anonymous session), resolves a pending
clarification, rewrites a follow-up into a standalone query, checks the turn limit and the token budgets, and
answers (from the answer cache when the same question was just answered); then, in a short transaction with the
session row locked, checks the turn limit again and records the turn.

A follow-up such as "and the second one?" or "how much is it?" means little on its own; before retrieval it is
rewritten into a standalone query from the previous turn (its query and the sources it cited). The rules are
deterministic, so they work the same with or without an LLM configured.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import inspect
import json
import logging
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import caches
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .. import state
from ..conf import app_settings
from ..insights import recording
from ..models import ApiKey, ConverseSession, Document, IntentNonce, Interaction
from ..registry import Capability, content_registry
from ..retrieval.embeddings import EmbeddingUnavailable
from ..retrieval.hybrid import Filters
from ..retrieval.index import EmbeddingModelChanged
from . import errors
from .answering import Clarification, ConverseContext, Ranked, Reply, max_answer_tokens
from .backends import get_answer_backend
from .limits import TokenReservation, add_daily_tokens, network_of, reserve_tokens, session_budget
from .validation import shown

logger = logging.getLogger(__name__)


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
    #: The ``RATE_LIMITS`` tier the requester is counted under (a verified agent's follows its trust), whose
    #: ``token_budget`` its sessions have; None: by the session (``authenticated`` when started with a key).
    tier: str | None = None

    @classmethod
    def of(cls, credentials: Any, address: str | None) -> Owner:
        """The owner of a front door's request: its credentials' key and ``rate_tier`` (a verified agent's follows
        its trust: a tier's token budget is its own, whatever the door), or none, and the client's address."""
        if credentials is None:
            return cls(None, address)
        return cls(credentials.key, address, credentials.rate_tier)

    def owns(self, session: ConverseSession) -> bool:
        if self.api_key is not None or session.api_key_id is not None:
            return self.api_key is not None and session.api_key_id == self.api_key.pk
        return network_of(session.client_ip) == network_of(self.address)


def idle_timeout() -> datetime.timedelta:
    return datetime.timedelta(seconds=app_settings.SESSION_IDLE_SECONDS)


def unknown_session(session_id: str) -> SessionError:
    return SessionError(
        404, f"Unknown session {shown(session_id)}. Start a new one with session_id null.", "unknown_session"
    )


def load_session(session_id: str, owner: Owner, *, lock: bool = False, expire: bool = True) -> ConverseSession:
    """The live session ``session_id`` of ``owner`` (row-locked with ``lock``, inside a transaction);
    :class:`SessionError` if it is unknown, expired or someone else's (404, as if unknown: nothing tells a
    stranger that the session exists). With ``expire`` False an idle session is not refused: a request that
    found it live records its turn, however long its answer took."""
    sessions = ConverseSession.objects.select_for_update() if lock else ConverseSession.objects
    session = sessions.filter(pk=session_id).first()
    if session is None or not owner.owns(session):
        raise unknown_session(session_id)
    if expire and timezone.now() - session.last_active_at > idle_timeout():
        session.delete()
        idle = app_settings.SESSION_IDLE_SECONDS
        waited = f"{idle // 60} minutes" if idle >= 120 else f"{idle} second{'' if idle == 1 else 's'}"
        raise SessionError(
            410,
            f"Session {session_id!r} expired after {waited} without a request. Start a new one with session_id null.",
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


def delete_expired_interactions() -> tuple[int, int]:
    """IntentWeb interactions idle for longer than ``INTENT_RETENTION_SECONDS`` (whatever their state: what they
    collected is personal data), and nonces older than twice the skew window: how many of each were deleted."""
    now = timezone.now()
    retention = datetime.timedelta(seconds=app_settings.INTENT_RETENTION_SECONDS)
    interactions, _ = Interaction.objects.filter(updated_at__lt=now - retention).delete()
    window = datetime.timedelta(seconds=2 * app_settings.INTENT_MAX_SKEW)
    nonces = IntentNonce.forget_before(now - window)
    return interactions, nonces


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


# --- a conversation's turn, for any front door ------------------------------------------------------------------


@dataclass
class Question:
    """One question to a MODE2 capability, in no protocol's words."""

    capability: Capability
    text: str
    session_id: str | None = None
    #: The agent's answer to a pending clarification.
    clarification: str | None = None
    content_type: str = "text/answer"
    #: The richer type the capability would have served, when negotiation fell back to text.
    fallback_from: str | None = None
    #: The agent's hint, capped by ``MAX_ANSWER_TOKENS``.
    max_tokens: int | None = None
    filters: Filters = field(default_factory=Filters)
    requesting_agent: str = ""
    #: Earlier questions the agent states itself (NLWeb ``context.prev``), used when the session has no turns.
    previous: Sequence[str] = ()
    #: An unknown, expired or someone else's ``session_id`` is an error (AHP); when False it starts a new
    #: conversation (NLWeb, whose clients may name conversations themselves).
    strict_session: bool = True
    #: With no ``clarification``, the text answers a pending clarification when it names one of its options
    #: (NLWeb has no field for the answer to an elicitation: the next question is the answer).
    text_may_clarify: bool = False
    #: False when only the sources are wanted (NLWeb's ``list`` mode): no answer is returned, no model is called (an
    #: ``instant`` backend's answer is written and dropped: it orders the sources).
    write_answer: bool = True


@dataclass
class Turn:
    """What a question got: a reply or a clarification, in the conversation ``session_id``."""

    session_id: str
    reply: Reply | None = None
    clarification: Clarification | None = None
    cached: bool = False


def _normalise(query: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", query.lower()).split())


#: How many earlier turns a model sees, and how much of each answer.
HISTORY_TURNS, HISTORY_ANSWER_CHARS = 3, 300
ABOUT_THE_CONVERSATION = re.compile(
    r"^\s*(?:what|which)\b.*\b(?:did|have)\s+i\s+(?P<just>just\s+)?(?:ask|say|asked|said)\b"
    r"(?:\s+(?:about|for))?(?:\s+(?P<when>first|last|before|earlier|previously|so\s+far))?"
    r"|^\s*what\s+was\s+my\s+(?P<which>first|last|previous)\s+question",
    re.IGNORECASE,
)


def about_the_conversation(text: str, turns: Sequence[dict[str, Any]]) -> str | None:
    """The answer to a question about the conversation itself ("which tea did I ask about first?", "what was my
    last question?") from the session's own turns, or None when ``text`` is not one (or there are no turns)."""
    match = ABOUT_THE_CONVERSATION.search(text)
    if match is None or not turns:
        return None
    # "Which one did I just ask about?": the last question.
    when = (match.group("when") or match.group("which") or ("last" if match.group("just") else "")).lower()
    if when in ("", "so far") or " ".join(when.split()) == "so far":
        asked = "; ".join(f"“{turn['query']}”" for turn in turns)
        return f"You have asked {len(turns)} question{'s' if len(turns) != 1 else ''} so far: {asked}."
    turn = turns[0] if when == "first" else turns[-1]
    ordinal = "first" if when == "first" else "last"
    about = turn.get("sources") or []
    topic = f", answered from “{about[0]['title']}” ({about[0]['url']})" if about else ""
    return f"Your {ordinal} question was “{turn['query']}”{topic}."


#: What a model is told instead of an earlier answer drawn from content that may no longer be used in answers.
WITHHELD = "(not repeated: its sources may no longer be used in answers)"


def history_of(turns: Sequence[dict[str, Any]], *, every: bool = False) -> tuple[tuple[str, str], ...]:
    """The recent turns a model sees, oldest first, as (question, answer); with ``every``, all of them (for a
    question about the conversation, which may ask about its first question; ``SESSION_MAX_TURNS`` bounds them).

    An answer drawn from content that ``ai_input`` now keeps out of answers (switched off for its model since the
    turn) is withheld: it quotes that content, and the prompt would carry it to the model after all. The question,
    the agent's own words, stays, so that the conversation still reads in order."""
    recent = list(turns) if every else turns[-HISTORY_TURNS:]
    withheld = _withheld(recent)
    return tuple(
        (turn["query"], WITHHELD if index in withheld else (turn.get("answer") or "")[:HISTORY_ANSWER_CHARS])
        for index, turn in enumerate(recent)
    )


def _withheld(turns: Sequence[dict[str, Any]]) -> set[int]:
    """The positions in ``turns`` of those answered from a document whose model no longer allows ``ai_input``."""
    snapshot = state.snapshot()
    if snapshot.site_signals["ai_input"] and all(signals["ai_input"] for signals in snapshot.model_signals.values()):
        return set()  # nothing is kept out of answers (the usual case): no query
    # A turn names its documents; one recorded before turns did, by its sources' URLs.
    drawn_from = [
        turn["documents"] if "documents" in turn else [s["url"] for s in turn.get("sources") or ()] for turn in turns
    ]
    named = {key for keys in drawn_from for key in keys}
    if not named:
        return set()
    ids, urls = [key for key in named if isinstance(key, int)], [key for key in named if isinstance(key, str)]
    found = Document.objects.filter(Q(pk__in=ids) | Q(url__in=urls))
    excluded = set()
    for pk, url, app_label, model in found.values_list("pk", "url", "content_type__app_label", "content_type__model"):
        if not snapshot.signals_for(f"{app_label}.{model}")["ai_input"]:
            excluded |= {pk, url}
    return {index for index, keys in enumerate(drawn_from) if excluded.intersection(keys)}


def converse(question: Question, owner: Owner) -> Turn:
    """Answer ``question`` for ``owner`` and record the turn; raises :mod:`.errors` for what is refused."""
    steps = converse_steps(question, owner)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def converse_steps(question: Question, owner: Owner) -> Generator[Ranked, None, Turn]:
    """:func:`converse` as a generator: it yields :class:`~.answering.Ranked` once the sources are known (before
    the answer is written, so a streaming front door can send them first) and returns the :class:`Turn`.

    The slow work (the query's embedding, the answer backend's call with its timeout and retries) runs on a
    session read without a lock and outside any transaction; only recording the turn locks the row, briefly,
    and checks again what a concurrent request may have changed meanwhile (see :func:`_locked`).

    What the turn was (answered, clarified, nothing found, refused) is noted for the traffic insights.
    """
    recording.note(
        capability=question.capability.name, question=question.text, requesting_agent=question.requesting_agent
    )
    try:
        turn = yield from _steps(question, owner)
    except errors.ConciergeError as exc:
        recording.note(outcome=recording.outcome_of_status(exc.status))
        raise
    except Exception:
        recording.note(outcome=recording.Outcome.ERROR)
        raise
    if turn.reply is None:
        recording.note(outcome=recording.Outcome.CLARIFICATION)
    else:
        reply = turn.reply
        outcome = recording.Outcome.NO_ANSWER if reply.no_answer else recording.Outcome.SUCCESS
        recording.note(
            outcome=outcome, tokens=reply.tokens_used, cached=turn.cached, sources=reply.document_ids, weak=reply.weak
        )
    return turn


def _steps(question: Question, owner: Owner) -> Generator[Ranked, None, Turn]:
    capability = question.capability
    session = _session(question, owner)
    check_turns(session)

    query = question.text
    filters = question.filters
    clarified = False
    answered = None
    pending = session.pending_clarification
    # Only a question of its own is answered here (one with a "kind" is a capability's input or routing's choice,
    # answered there); any other still ends with this turn (_record), as one open question per session.
    own = pending if pending and "kind" not in pending else None
    if pending is None and question.clarification and session.turns:
        # The same answer to the same question again (a retry whose response was lost) chooses what it chose when
        # it answered the clarification the last turn ended, rather than being added to the query as words.
        last = session.turns[-1].get("clarified") or {}
        if last.get("answer") == question.clarification.strip().lower() and last.get("query") == question.text:
            own = last["clarification"]
    options = {str(option).lower() for option in (own or {}).get("options") or ()}
    if question.clarification is None and question.text_may_clarify and question.text.strip().lower() in options:
        question = dataclasses.replace(question, clarification=question.text)
    if question.clarification and own:
        choice = question.clarification.strip().lower()
        clarified = True
        answered = {"clarification": own, "answer": choice, "query": question.text}
        query = own.get("query") or query
        if choice in own.get("scopes", {}):
            filters = dataclasses.replace(filters, models=own["scopes"][choice])
        else:
            query = f"{query} {question.clarification}"
    elif question.clarification:
        query = f"{query} {question.clarification}"
        clarified = True
    turns = session.turns or [{"query": text, "standalone_query": text} for text in question.previous]
    recalled = about_the_conversation(question.text, session.turns) if not clarified else None
    if recalled is not None and get_answer_backend().name == "extractive":  # a model answers from its prompt
        yield Ranked([])
        reply = Reply(answer=recalled, content_type=question.content_type)
        return _record(session, owner, pending, question.text, question.text, reply, cached=False)
    # A question about the conversation is asked as it is (rewritten, "which tea did I ask about first?" would
    # become a question about the last turn's topic).
    standalone = standalone_query(query, turns) if not clarified and recalled is None else query

    network = network_of(owner.address)
    context = ConverseContext(
        capability=capability,
        query=standalone,
        original_query=question.text,
        content_type=question.content_type,
        fallback_from=question.fallback_from,
        max_tokens=max_answer_tokens(question.max_tokens),
        filters=filters,
        clarified=clarified,
        write_answer=question.write_answer,
        history=history_of(turns, every=recalled is not None),
    )
    reservation = _reserve_budgets(session, network, owner.tier, context.max_tokens)
    try:
        return (
            yield from _answer(
                question, owner, session, pending, context, network, standalone, clarified, query, answered
            )
        )
    finally:
        reservation.release()  # what the answer spent is counted by now (or it spent nothing)


def _answer(
    question: Question,
    owner: Owner,
    session: ConverseSession,
    pending: dict[str, Any] | None,
    context: ConverseContext,
    network: str,
    standalone: str,
    clarified: bool,
    query: str,
    answered: dict[str, Any] | None = None,
) -> Generator[Ranked, None, Turn]:
    capability = question.capability
    # A model's answer may draw on the conversation: cached, it would be served to another one.
    personal = bool(context.history) and get_answer_backend().name != "extractive"
    cacheable = standalone == question.text and not clarified and not personal and not context.filters.by_query
    cache_key = _cache_key(context) if cacheable else None
    cache = caches[app_settings.CACHE_ALIAS]
    cached = cache.get(cache_key) if cache_key else None
    if cached is not None:
        reply, from_cache = Reply(**cached), True
        reply.tokens_used = 0
        yield Ranked(list(reply.document_ids))
    else:
        try:
            result = capability.handler(context)
            if inspect.isgenerator(result):
                result = yield from result
        except (EmbeddingUnavailable, EmbeddingModelChanged) as exc:
            logger.exception("Retrieval is unavailable")
            raise errors.Unavailable(f"Search is unavailable right now: {exc}") from exc
        if isinstance(result, Clarification):
            return _clarify(session, owner, result, query)
        reply, from_cache = result, False
        # The extractive stand-in for a model that did not answer is for this request: cached, it would outlast
        # the outage.
        if cache_key and app_settings.ANSWER_CACHE_TIMEOUT != 0 and reply.guardrail != "model_unavailable":
            cache.set(cache_key, dataclasses.asdict(reply), app_settings.ANSWER_CACHE_TIMEOUT)
    add_daily_tokens(network, reply.tokens_used)  # spent, whether or not the turn is recorded
    return _record(session, owner, pending, question.text, standalone, reply, cached=from_cache, answered=answered)


def _record(
    session: ConverseSession,
    owner: Owner,
    pending: dict[str, Any] | None,
    text: str,
    standalone: str,
    reply: Reply,
    *,
    cached: bool,
    answered: dict[str, Any] | None = None,
) -> Turn:
    """Record the turn on the session (under its row lock) and return it; ``answered``: the clarification it
    answered, with the answer and the question it was sent with (a repeat of them chooses the same)."""
    turn = {
        "query": text,
        "standalone_query": standalone,
        "answer": reply.answer[:1000],
        "sources": [{"title": s["title"], "url": s["url"]} for s in reply.sources],
        # What the answer was drawn from, so that a later turn can tell whether it may still reach a model.
        "documents": reply.document_ids,
        "tokens": reply.tokens_used,
    }
    if answered is not None:
        turn["clarified"] = answered
    with transaction.atomic():
        session = _locked(session, owner)
        if session.pending_clarification == pending:  # answered or abandoned, unless replaced meanwhile
            session.pending_clarification = None
        session.turns = [*session.turns, turn]
        session.tokens_used += reply.tokens_used
        session.last_active_at = timezone.now()
        session.save()
    return Turn(session.pk, reply=reply, cached=cached)


def _session(question: Question, owner: Owner) -> ConverseSession:
    if question.session_id:
        try:
            return _load(question.session_id, owner)
        except (errors.NotFound, errors.Gone):
            if question.strict_session:
                raise
    return new_session(question.capability.name, question.requesting_agent, owner)


def _load(session_id: str, owner: Owner, *, lock: bool = False, expire: bool = True) -> ConverseSession:
    try:
        return load_session(session_id, owner, lock=lock, expire=expire)
    except SessionError as exc:
        error = errors.Gone if exc.status == 410 else errors.NotFound
        raise error(exc.message, reason=exc.reason) from exc


def _locked(session: ConverseSession, owner: Owner) -> ConverseSession:
    """``session`` read again under its row lock (in the caller's transaction) to record a turn: it may have
    been deleted, or filled up by concurrent requests, while this one was being answered. It was live when the
    request read it: an answer that took longer than the idle time (a slow model) does not expire it."""
    if session._state.adding:
        return session  # started by this request: nobody else can see it yet
    session = _load(session.pk, owner, lock=True, expire=False)
    check_turns(session)
    return session


def check_turns(session: ConverseSession) -> None:
    if len(session.turns) >= app_settings.SESSION_MAX_TURNS:
        raise errors.RateLimited(
            f"This session has had its {app_settings.SESSION_MAX_TURNS} turns; start a new session.",
            scope="session",
            retry_after=None,
        )


def _reserve_budgets(session: ConverseSession, network: str, tier: str | None, tokens: int) -> TokenReservation:
    """Hold ``tokens`` of the session's and the network's budgets while the answer is written (429 when one is
    spent): requests sent at once cannot all find the same last tokens left."""
    if get_answer_backend().name == "extractive":
        return TokenReservation()  # budgets count model tokens; extractive answers spend none
    budget = session_budget(tier or ("authenticated" if session.api_key_id else "unauthenticated"))
    return reserve_tokens(session, budget, network, app_settings.DAILY_TOKEN_BUDGET_PER_IP, tokens)


def _cache_key(context: ConverseContext) -> str:
    parts = [
        context.capability.name,
        _normalise(context.query),
        context.content_type,
        context.fallback_from,
        context.max_tokens,
        context.write_answer,
        sorted(context.filters.models),
        sorted(context.filters.content_types),
        str(context.filters.published_after),
        str(context.filters.published_before),
        None if context.filters.documents is None else sorted(context.filters.documents),
        get_answer_backend().name,
        state.snapshot().token,
        # The registry as it is now: the token names it as it was when this process's snapshot was built (up to
        # STATE_TTL ago), and an answer from a model unregistered since must not come back from the cache.
        [config.label for config in content_registry],
    ]
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return f"agent_handshake:answer:{digest}"


def _clarify(session: ConverseSession, owner: Owner, clarification: Clarification, query: str) -> Turn:
    with transaction.atomic():
        session = _locked(session, owner)
        session.pending_clarification = {
            "question": clarification.question,
            "options": clarification.options,
            "scopes": clarification.scopes,
            "query": query,
        }
        session.last_active_at = timezone.now()
        session.save()
    return Turn(session.pk, clarification=clarification)
