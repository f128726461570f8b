"""One call of a MODE3 capability, for any front door: input, idempotency, running or accepting.

A front door has authenticated the caller, checked the capability's scope and negotiated the content type; it
builds a :class:`Call` and gets back one of:

- :class:`Done`: a ``query`` or ``action`` ran (in a transaction: a refused or malformed outcome undoes its
  writes), with its checked :class:`~.invocation.Outcome`;
- :class:`Accepted`: an ``async`` capability's job, queued for a worker (the callback URL checked first);
- :class:`NeedsInput`: fields the query did not state, asked for in a session, whose next turn fills them in;
- :class:`Refused`: an expected refusal the caller should see (invalid input, a missing field, an unsafe
  callback URL, the capability's own :class:`~.invocation.ActionFailed`).

Errors that must leave nothing behind (an unknown session, a capability's broken output) are raised as
:mod:`.errors`. With an idempotency key (and credentials), the first response *as the front door rendered it*
is stored, in the same transaction as the work, and returned again for a retry of the same request (a different
request with the same key is a :class:`~.errors.Conflict`): the record is the front door's own, since the
fingerprint includes its protocol.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..conf import app_settings
from ..insights import recording
from ..models import ApiKey, ConverseSession, IdempotencyRecord, Job
from ..registry import Capability
from . import callbacks, errors, jobs, slot_filling
from . import limits as ratelimit
from .conversation import Owner, SessionError, check_turns, load_session, new_session
from .invocation import (
    ActionFailed,
    Deferred,
    Invocation,
    Outcome,
    OutputInvalid,
    check_input,
    check_output,
    extract_input,
    field_question,
    whole_numbers,
)

logger = logging.getLogger(__name__)
MAX_IDEMPOTENCY_KEY = 255


def kept_since() -> datetime.datetime:
    """When the oldest idempotency record still in force was made (``IDEMPOTENCY_TTL`` ago)."""
    return timezone.now() - datetime.timedelta(seconds=app_settings.IDEMPOTENCY_TTL)


@dataclass
class Done:
    outcome: Outcome
    session_id: str | None = None


@dataclass
class Accepted:
    job: Job


@dataclass
class NeedsInput:
    question: str
    missing: list[str]
    session_id: str


@dataclass
class Refused:
    error: errors.ConciergeError


Result = Done | Accepted | NeedsInput | Refused
OUTCOMES = {
    Done: recording.Outcome.SUCCESS,
    Accepted: recording.Outcome.SUCCESS,
    NeedsInput: recording.Outcome.CLARIFICATION,
    Refused: recording.Outcome.REFUSED,
}


def noted(result: Result) -> Result:
    """``result``, noted for the traffic insights."""
    recording.note(outcome=OUTCOMES[type(result)])
    return result


@dataclass(frozen=True)
class CallbackCheck:
    """A callback URL, checked: the refusal an async call gives for it (None: no URL, or a safe one)."""

    url: str
    field: str
    refusal: Refused | None


#: Seconds an agent is asked to wait before sending a call again whose callback host could not be looked up.
LOOKUP_RETRY_AFTER = 30


def check_callback(url: str, field: str = "callback_url") -> CallbackCheck:
    """Check a callback URL named by the request's ``field``, resolving its host.

    That takes as long as DNS does (seconds, for a name server the agent may choose), so a front door asks before
    its transaction, holding no row lock meanwhile, and gives the answer to its :class:`Call`
    (:attr:`Call.callback_check`). Checking early opens no rebinding window: a delivery resolves and checks the host
    again and connects only to an address it checked.
    """
    refusal = None
    if url:
        try:
            callbacks.check_callback_url(url)
        except callbacks.UnsafeCallbackURL as exc:
            if exc.temporary:  # the site's resolver failed or was slow: no fault of the URL's, worth a retry
                error: errors.ConciergeError = errors.Unavailable(
                    f"{field} could not be checked right now: {exc}", fields=[field], retry_after=LOOKUP_RETRY_AFTER
                )
            else:
                error = errors.InvalidInput(f"{field} is refused: {exc}", fields=[field])
            refusal = Refused(error)
    return CallbackCheck(url, field, refusal)


#: A front door's rendering of a result: (HTTP status, JSON body).
Rendered = tuple[int, dict[str, Any]]


@dataclass
class Call:
    """One MODE3 request, in no protocol's words."""

    capability: Capability
    owner: Owner
    protocol: str
    #: The client's address as the front door found it (None: not a valid one): an anonymous caller's capability
    #: limit counts its network.
    address: str | None
    #: The resource asked for (a URL path): with ``protocol``, what an idempotency record is kept for.
    path: str
    query: str = ""
    #: Structured input (AHP ``context.input``, NLWeb ``query.input``); None to extract it from ``query``.
    input: dict[str, Any] | None = None
    #: The field prefix the caller's structured input is named with in errors ("context.input.").
    input_prefix: str = "input."
    session_id: str | None = None
    #: An unknown or expired ``session_id`` is an error (AHP); when False the call starts afresh (NLWeb).
    strict_session: bool = True
    clarification: str | None = None
    requesting_agent: str = ""
    callback_url: str = ""
    callback_field: str = "callback_url"
    content_type: str = "text/answer"
    fallback_from: str | None = None
    #: What identifies the request for idempotency (the body without credentials, say).
    fingerprint_of: Any = None
    #: The rate-limit counts taken (the front door reports the most constrained in its headers).
    usages: list[ratelimit.Usage] = field(default_factory=list)
    #: Whether :meth:`respond`'s transaction is a savepoint when the caller has one open: False for a caller whose
    #: refusals (raised) end its own transaction anyway (IntentWeb's message), which spares two round trips.
    savepoint: bool = True
    #: Whether :meth:`respond` returned a stored response (an idempotent retry).
    replayed: bool = field(default=False, init=False)
    #: The callback URL's check (:func:`check_callback`), when the front door made it before its own transaction
    #: (IntentWeb's message); else :meth:`respond` makes it before the call's.
    callback_check: CallbackCheck | None = field(default=None, repr=False)

    @property
    def key(self) -> ApiKey | None:
        return self.owner.api_key

    def respond(self, render: Callable[[Result], Rendered], idempotency_key: str | None = None) -> Rendered:
        """Count, then run the call once (per idempotency key) and return the front door's rendering."""
        recording.note(capability=self.capability.name, question=self.query, requesting_agent=self.requesting_agent)
        try:
            self.count()
            if idempotency_key is not None and len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
                raise errors.InvalidInput(f"Idempotency-Key is over {MAX_IDEMPOTENCY_KEY} characters.")
            self.check_callback()  # before the transaction: no row lock waits on DNS
            with transaction.atomic(savepoint=self.savepoint):
                if idempotency_key and self.key is not None:
                    return self.once(idempotency_key, render)
                return render(self.run())
        except errors.ConciergeError as exc:
            recording.note(outcome=recording.outcome_of_status(exc.status))
            raise

    def count(self) -> None:
        """The capability's own rate limit (``rate_limit``, else ``ACTION_RATE_LIMIT`` for actions)."""
        capability = self.capability
        rate = capability.rate_limit or (
            app_settings.ACTION_RATE_LIMIT if capability.action_type in ("action", "async") else None
        )
        if not rate:
            return
        usage = ratelimit.count_request(f"capability:{capability.name}", self.counted_as(), rate)
        self.usages.append(usage)
        if usage.exceeded:
            raise errors.RateLimited(
                f"Rate limit of {rate} exceeded for {capability.name!r}.",
                scope=usage.public_scope,
                retry_after=usage.retry_after,
            )

    def counted_as(self) -> str:
        """Whose budget the capability's own limit counts: the key's, else the client address's."""
        return self.key.key_id if self.key else ratelimit.network_of(self.address)

    def fingerprint(self) -> str:
        canonical = json.dumps([self.protocol, self.path, self.fingerprint_of], sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def stored(self, idempotency_key: str | None) -> Rendered | None:
        """The response stored for an earlier run of this same request under ``idempotency_key``, if there is
        one (for a front door that must answer a retry after the conversation has moved on); a different request
        with the key is a :class:`~.errors.Conflict`."""
        if not idempotency_key or self.key is None:
            return None
        record = IdempotencyRecord.objects.filter(
            api_key=self.key, key=idempotency_key, status_code__gt=0, created_at__gte=kept_since()
        ).first()
        if record is None:
            return None
        if record.request_hash != self.fingerprint():
            raise errors.Conflict(
                "This Idempotency-Key was used for a different request; use a new key for a new request."
            )
        self.replayed = True
        return record.status_code, record.body

    def once(self, idempotency_key: str, render: Callable[[Result], Rendered]) -> Rendered:
        """Run at most once per (API key, Idempotency-Key); a retry gets the first response."""
        fingerprint = self.fingerprint()
        # A record past IDEMPOTENCY_TTL is over for the agent, whether or not the cleanup has deleted it yet: the key
        # starts a new request (a retry waiting on the new record's unique index finds that one).
        IdempotencyRecord.objects.filter(api_key=self.key, key=idempotency_key, created_at__lt=kept_since()).delete()
        record, created = IdempotencyRecord.objects.get_or_create(
            api_key=self.key, key=idempotency_key, defaults={"request_hash": fingerprint, "status_code": 0, "body": {}}
        )
        if not created:
            if record.request_hash != fingerprint:
                raise errors.Conflict(
                    "This Idempotency-Key was used for a different request; use a new key for a new request."
                )
            self.replayed = True
            return record.status_code, record.body
        status, body = render(self.run())
        record.status_code, record.body = status, body
        record.save(update_fields=["status_code", "body"])
        return status, body

    def run(self) -> Result:
        resolved = self.resolve_input()
        if not isinstance(resolved, tuple):
            return noted(resolved)
        data, session = resolved
        if self.capability.action_type == "async":
            return noted(self.accept(data, session))
        return noted(self.execute(data, session))

    def resolve_input(self) -> tuple[dict[str, Any], ConverseSession | None] | Refused | NeedsInput:
        capability = self.capability
        session = None
        # Whether this call answers the question this capability asked in the session for its missing input (even
        # when the first turn found nothing to keep). Another capability's question is not this one's: its answer
        # and what it gathered are not read, and this call's turn closes it (a session has one open question).
        continuing = False
        gathered: dict[str, Any] = {}
        asked: list[str] = []
        if self.session_id:
            try:
                session = load_session(self.session_id, self.owner, lock=True)
            except SessionError as exc:
                if self.strict_session:
                    error = errors.Gone if exc.status == 410 else errors.NotFound
                    raise error(exc.message, reason=exc.reason) from exc
            if session is not None:
                check_turns(session)  # a call is a turn of the session too: SESSION_MAX_TURNS bounds them all
                pending = session.pending_clarification or {}
                continuing = pending.get("kind") == "input" and session.capability == capability.name
                if continuing:
                    gathered = dict(pending.get("input") or {})
                    asked = list(pending.get("missing") or [])
        structured = self.input is not None
        answered: list[str] | None = None
        if continuing:  # the answer fills in what was missing, read and merged as every front door does
            answer = slot_filling.gather(
                capability, gathered, [self.clarification or self.query], given=self.input, asked=asked
            )
            data, answered = answer.values, answer.answered
        elif structured:
            data = dict(self.input or {})
        else:
            data = extract_input(capability, self.query)
        problem = check_input(capability, data)
        if problem is None:
            return whole_numbers(capability.input_schema, data), session
        if problem.invalid:
            prefix = self.input_prefix if structured else "input."
            fields = sorted(prefix + name for name in problem.invalid)
            detail = "; ".join(f"{name}: {message}" for name, message in sorted(problem.invalid.items())[:5])
            return Refused(errors.InvalidInput(f"Invalid input for {capability.name!r}: {detail}", fields=fields))
        if structured and not continuing:
            return Refused(
                errors.MissingInput(
                    f"{capability.name!r} needs: {', '.join(problem.missing)}.",
                    fields=[f"{self.input_prefix}{name}" for name in problem.missing],
                )
            )
        return self.ask(session, data, problem.missing, answered)

    def ask(
        self,
        session: ConverseSession | None,
        data: dict[str, Any],
        missing: list[str],
        answered: list[str] | None = None,
    ) -> NeedsInput:
        """Ask for the fields the query did not state; the answer comes back as the next turn. ``answered``: the
        fields asked for last time that this turn's answer filled (None: this turn answered no question)."""
        if session is None:
            session = new_session(self.capability.name, self.requesting_agent, self.owner)
        question = field_question(self.capability, missing, answered)
        session.capability = self.capability.name
        session.pending_clarification = {"kind": "input", "input": data, "missing": missing, "question": question}
        session.last_active_at = timezone.now()
        session.save()
        return NeedsInput(question, missing, session.pk)

    def check_callback(self) -> Refused | None:
        """The refusal of an async call's unsafe callback URL (None: no URL, or a safe one), checked once
        (:func:`check_callback`): :meth:`respond` asks before its transaction, unless the front door gave the check
        it made before its own (:attr:`callback_check`); the refusal is still given only where :meth:`accept` gives
        it, after the input's."""
        if self.capability.action_type != "async":
            return None
        check = self.callback_check
        if check is None or (check.url, check.field) != (self.callback_url, self.callback_field):
            check = self.callback_check = check_callback(self.callback_url, self.callback_field)
        return check.refusal

    def accept(self, data: dict[str, Any], session: ConverseSession | None = None) -> Accepted | Refused:
        refusal = self.check_callback()
        if refusal is not None and refusal.error.status == 503:
            # The site's lookup failed, not the request: raised, so nothing is kept (no idempotent answer replays
            # it) and the same request may be sent again after its Retry-After.
            raise refusal.error
        if refusal is not None:
            return refusal
        job = jobs.accept(
            self.capability,
            input=data,
            query=self.query,
            key=self.key,
            requesting_agent=self.requesting_agent,
            content_type=self.content_type,
            fallback_from=self.fallback_from,
            callback_url=self.callback_url,
            protocol=self.protocol,
        )
        # The job is this turn of the session, as a query's or an action's result is: the question it answered is
        # closed (kept, the same answer sent again would queue the same job again) and the turn counts.
        self.record_turn(session, "", job=job.pk)
        return Accepted(job)

    def execute(self, data: dict[str, Any], session: ConverseSession | None) -> Done | Refused:
        capability = self.capability
        invocation = Invocation(capability, data, self.query, self.key, self.requesting_agent)
        try:
            with transaction.atomic():  # a refused or malformed outcome undoes the handler's writes
                result = capability.handler(invocation)
                if isinstance(result, Deferred):
                    raise OutputInvalid(f"{capability.name} deferred, but only async capabilities may.")
                outcome = check_output(capability, result)
        except ActionFailed as exc:
            return Refused(errors.ConciergeError(exc.message, code=exc.code, status=exc.status, **exc.extra))
        except OutputInvalid:
            logger.exception("MODE3 capability %s", capability.name)
            raise errors.Failed("The capability failed; the error was logged.") from None
        self.record_turn(session, outcome.answer)
        return Done(outcome, session.pk if session is not None else None)

    def record_turn(self, session: ConverseSession | None, answer: str, **extra: Any) -> None:
        """This call as a turn of ``session`` (locked by :meth:`resolve_input`), closing its pending question."""
        if session is None:
            return
        session.pending_clarification = None
        session.turns = [*session.turns, {"query": self.query, "answer": answer[:1000], **extra}]
        session.last_active_at = timezone.now()
        session.save()
