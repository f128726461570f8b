"""Async jobs (AHP §6.4, §9): accepted at once, run on a Celery worker, read by polling or delivered by callback.

Nothing is lost and nothing is done twice:

- The job is a row in PostgreSQL, created in the request's transaction; the Celery message, sent on commit,
  only says "run job X". A lost message (the filesystem broker does not redeliver after a worker dies) is sent
  again by :func:`recover`, which the beat schedule runs (``agent_handshake.recover_jobs``).
- A worker runs a job inside one transaction that holds the job's row lock. The capability's own database
  writes are in that transaction, so they commit together with the job's success, or not at all: a worker
  killed mid-job leaves no half-done work, and PostgreSQL releases the lock when its connection dies.
- Every other worker (a redelivered message, a recovery) takes the row with ``SKIP LOCKED``: while one worker
  holds the job, the others leave it; once it is finished, they find nothing to do.
- The worker's claim (``running``, one more attempt) is committed before its run takes the row lock, so a worker
  killed mid-job has used an attempt. Between the two, the claim itself is a lease: a second delivery of the same
  message that finds the job running, its row unlocked and its claim younger than :data:`CLAIM_LEASE` (by the
  database's clock) leaves it, uncounted, to the live worker about to lock it. Nothing is held between two
  transactions, so this holds behind a pooler in transaction mode (PgBouncer), which gives a worker's server
  connection to other clients between its transactions. A claim older than the lease whose row nobody holds
  belongs to a dead worker: the next delivery (or recovery's) claims the job again.

Callbacks are sent by :func:`deliver_callback` under the same discipline: the row lock while delivering, state
saved after each attempt, retries with exponential backoff and jitter, recovery of lost retries.

A job acts on behalf of whoever started it, so an operator's refusal of its key reaches the work the key queued
before: a verified agent's block (``VerifiedAgent.blocked``, code ``agent_blocked``), the key's revocation
(``ApiKey.revoked_at``, ``key_revoked``) or its client's deactivation (``AgentClient.is_active``,
``client_inactive``). The claim of such a job ends it ``cancelled`` with that code without running it, and its
callback is given up, with the reason, instead of sent. A job already running is not interrupted; only its callback
is withheld. Each is read by one subquery of the statement that locks the job anyway (:func:`owner_refusal`), and
taking the key back into use revives nothing. A key's expiry is no such refusal: see :func:`owner_refusal`.
Deleting the key ends its queued work at once (:func:`withdraw_deleted_keys_jobs`, code ``key_deleted``). A scope
the key has lost since the job was accepted (or that a deploy put its capability under) fails the job ``forbidden``
when a worker takes it up, unrun, as the key's next call would be refused.
"""

from __future__ import annotations

import datetime
import json
import logging
import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

from celery import current_app
from django.db import DatabaseError, models, transaction
from django.db.models import Case, CharField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Now
from django.utils import timezone

from ..conf import app_settings
from ..identity.trust import blocked_owner, scopes_of
from ..models import ApiKey, CancelRequest, IdempotencyRecord, Job, SeenSignature, VerifiedAgent
from ..registry import Capability, capability_registry
from ..signals import registry_changed
from ..text import visible_name
from . import callbacks, errors
from .invocation import (
    ActionFailed,
    Deferred,
    Invocation,
    Outcome,
    OutputInvalid,
    check_output,
)

logger = logging.getLogger(__name__)
Status = Job.Status
ACTIVE = [Status.QUEUED, Status.RUNNING]


# Both run after the job's row is committed: a broker that cannot take the message must not fail the request (an
# agent told "500" about a job it was in fact given would start it again); the row stays, and recover() sends it.
# The tasks are found by name: agent_handshake.tasks defines them and calls this module.


def _enqueue(job_id: str, countdown: float | None = None) -> None:
    try:
        current_app.tasks["agent_handshake.run_job"].apply_async((job_id,), countdown=countdown)
    except Exception:
        logger.exception("Job %s: the broker did not take its message; recovery will send it again", job_id)


def _enqueue_callback(job_id: str, countdown: float | None = None) -> None:
    try:
        current_app.tasks["agent_handshake.deliver_callback"].apply_async((job_id,), countdown=countdown)
    except Exception:
        logger.exception("Job %s: the broker did not take its callback; recovery will send it again", job_id)


def accept(
    capability: Capability,
    *,
    input: dict[str, Any],
    query: str,
    key: ApiKey | None,
    requesting_agent: str,
    content_type: str,
    fallback_from: str | None,
    callback_url: str = "",
    protocol: str = "ahp",
) -> Job:
    """Create the job and send it to a worker once the transaction commits."""
    job = Job.objects.create(
        protocol=protocol,
        capability=capability.name,
        api_key=key,
        requesting_agent=visible_name(requesting_agent, 128),  # shown to operators on the desk: as it shows
        query=query,
        input=input,
        content_type=content_type,
        fallback_from=fallback_from or "",
        eta_seconds=capability.eta_seconds if capability.eta_seconds is not None else app_settings.JOB_ETA_SECONDS,
        progress="Queued",
        callback_url=callback_url,
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def outcome_of(job: Job) -> Outcome | None:
    """A finished job's outcome (None unless it succeeded)."""
    if job.status != Status.SUCCESS or not job.result:
        return None
    result = job.result
    return Outcome(result.get("data") or {}, result.get("answer") or "", list(result.get("side_effects") or []))


#: Front door name -> ``render(job) -> JSON body`` of its callbacks (registered by the front door at start-up). A
#: renderer that cannot render now (IntentWeb's, while the site key does not load) raises
#: :class:`~.errors.Unavailable`: the attempt counts as one to an unreachable receiver, tried again with the backoff.
CALLBACK_RENDERERS: dict[str, Callable[[Job], dict[str, Any]]] = {}


def register_callback_renderer(protocol: str, render: Callable[[Job], dict[str, Any]]) -> None:
    CALLBACK_RENDERERS[protocol] = render


# --- running ----------------------------------------------------------------------------------------------------


#: How long a claim keeps other deliveries off its job before its worker's run holds the row: far longer than the
#: moment between the claim's commit and the run's lock, short enough that a worker killed in its first seconds
#: does not wait for recovery.
CLAIM_LEASE = datetime.timedelta(seconds=2)


def _claim(job_id: str) -> bool:
    """Mark the job running (committed at once, so pollers see it); False if it is not runnable here, or a fresh
    claim says another worker is about to run it."""
    with transaction.atomic():
        job = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(pk=job_id, status__in=ACTIVE)
            .exclude(status=Status.RUNNING, started_at__gt=Now() - CLAIM_LEASE)
            .annotate(owner_refusal=owner_refusal())
            .first()
        )
        if job is None:
            return False
        if job.owner_refusal:  # refused since it was queued (or since its last attempt): not run on its behalf
            _owner_refused(job)
            return False
        if cancel_requested(job.pk):  # cancelled while its worker died, or between two attempts
            _cancelled(job)
            return False
        if job.attempts >= app_settings.JOB_MAX_ATTEMPTS:
            _fail(job, "concierge_error", f"The job was tried {job.attempts} times without finishing.")
            return False
        job.status = Status.RUNNING
        job.attempts += 1
        job.started_at = Now()  # the lease's start, by the clock that judges it
        job.progress = "Running" if job.attempts == 1 else f"Running (attempt {job.attempts})"
        job.recoveries, job.recover_after = 0, None  # a message arrived: recovery starts over if this run dies
        job.save(
            update_fields=["status", "attempts", "started_at", "progress", "recoveries", "recover_after", "updated_at"]
        )
        return True


def run(job_id: str) -> str:
    """Run one job to its next state; safe to call any number of times, from any number of workers."""
    if not _claim(job_id):
        return "skipped"
    with transaction.atomic():
        job = Job.objects.select_for_update(skip_locked=True).filter(pk=job_id, status=Status.RUNNING).first()
        if job is None:
            return "skipped"
        capability = capability_registry.get(job.capability)
        if not offered(capability):
            _fail(job, "unavailable", unoffered_message(job))
            return job.status
        if capability.requires_auth and job.api_key is not None and not _allows(job.api_key, capability.scope):
            # The scope was checked at acceptance; an operator may have taken it from the key since, or a deploy put
            # the capability under another: the work is not done for a key that may no longer ask for it.
            refused = errors.Forbidden(
                f"This API key does not have the scope {capability.scope!r} that {capability.name!r} requires."
            )
            _fail(job, refused.code, refused.message)
            return job.status
        invocation = Invocation(
            capability=capability,
            input=job.input,
            query=job.query,
            key=job.api_key,
            requesting_agent=job.requesting_agent,
            job=job,
        )
        try:
            with transaction.atomic():  # the handler's writes stand or fall with its outcome
                result = capability.handler(invocation)
                if cancel_requested(job.pk):
                    raise _Cancelled
                if isinstance(result, Deferred):
                    _defer(job, result)
                else:
                    _complete(job, capability, check_output(capability, result))
        except _Cancelled:
            _cancelled(job)
        except ActionFailed as exc:
            _fail(job, exc.code, exc.message, **exc.extra)  # its details (fields...), as a synchronous refusal's
        except OutputInvalid:
            logger.exception("Job %s: invalid output", job.pk)
            _fail(job, "concierge_error", "The capability failed; the error was logged.")
        except errors.ConciergeError as exc:
            if 400 <= exc.status < 500:
                # The capability's answer (errors.InvalidInput, errors.Conflict...), a refusal as on the synchronous
                # path: the same input would be refused again, so it ends the job like ActionFailed.
                _fail(job, exc.code, exc.message, **exc.details)
            else:
                _crashed(job)
        except Exception:
            _crashed(job)
    if job.status == Status.WAITING and cancel_requested(job.pk):
        # Asked for after the check above, before the commit: :func:`cancel` looks again too, so one of us sees it.
        job = cancel(job.pk)
    return job.status


def offered(capability: Capability | None) -> bool:
    """Whether the site still has ``capability`` (a registry entry, or None) to run or to complete a job of."""
    return capability is not None and capability.handler is not None


def unoffered_message(job: Job) -> str:
    return f"The capability {job.capability!r} is no longer offered."


#: When this process's capability registry took its present shape: its start-up, or the last capability registered or
#: unregistered since. A rolling deploy runs two releases side by side: a request put on the desk later may be of a
#: capability that a newer release offers and this older process has never known, so only the requests put on the desk
#: before it are judged here (:func:`withdrawn_here`).
registry_shaped_at = timezone.now()


def _registry_reshaped(sender: Any, **kwargs: Any) -> None:
    global registry_shaped_at
    registry_shaped_at = timezone.now()


registry_changed.connect(_registry_reshaped, dispatch_uid="agent_handshake.jobs.registry_shaped_at")


def withdrawn_here(job: Job) -> bool:
    """Whether this process may end waiting ``job``, whose capability it does not offer: the job reached the desk
    before this process's registry took its shape (a newer release's request is left to a process that knows it)."""
    return job.updated_at < registry_shaped_at


def _allows(key: ApiKey, scope: str | None) -> bool:
    """Whether ``key`` may call a capability of ``scope`` now, as a request with it would be judged: a verified
    agent's key by its trust tier's scopes and its own (:func:`~agent_handshake.identity.trust.scopes_of`)."""
    if not scope:
        return True
    agent = VerifiedAgent.objects.filter(key=key).first()
    scopes = scopes_of(agent) if agent is not None else key.scopes or []
    return "*" in scopes or scope in scopes


def _crashed(job: Job) -> None:
    """The capability raised (called in the except block): logged, and its job tried again or failed."""
    logger.exception("Job %s failed (attempt %s)", job.pk, job.attempts)
    if job.attempts < app_settings.JOB_MAX_ATTEMPTS:
        job.status = Status.QUEUED
        job.progress = "Retrying after an error"
        job.save(update_fields=["status", "progress", "updated_at"])
        job_id, countdown = job.pk, _backoff(job.attempts)
        transaction.on_commit(lambda: _enqueue(job_id, countdown))
    else:
        _fail(job, "concierge_error", "The capability failed; the error was logged.")


def _complete(job: Job, capability: Capability, outcome: Outcome) -> None:
    # The outcome's data, not a protocol's body: each front door renders a finished job its own way.
    job.result = {"data": outcome.data, "answer": outcome.answer, "side_effects": outcome.side_effects}
    job.status = Status.SUCCESS
    job.progress = "Done"
    job.finished_at = timezone.now()
    _schedule_callback(job)
    job.save()


class _Cancelled(Exception):
    """Raised inside the handler's transaction to roll its writes back: the caller cancelled the job."""


def cancel_requested(job_id: str) -> bool:
    return CancelRequest.objects.filter(job_id=job_id).exists()


def _cancelled(job: Job) -> None:
    job.status = Status.CANCELLED
    job.error = {"code": "cancelled", "message": "The job was cancelled at the caller's request."}
    job.progress = "Cancelled"
    job.finished_at = timezone.now()
    CancelRequest.objects.filter(job_id=job.pk).delete()
    _schedule_callback(job)
    job.save()


class OwnerRefusal(NamedTuple):
    """What a job refused for its owner says: its error's message, its progress, and why its callback was not sent
    (the admin's column). Written for the operator who reads them, and for the agent, which may poll again once its
    key is back in use."""

    error: str
    progress: str
    callback: str


#: :func:`owner_refusal`'s codes, the first that applies named: a block is the agent's own, whatever its key.
OWNER_REFUSALS = {
    "agent_blocked": OwnerRefusal(
        "The job was not run: the DID that started it is blocked by the site's operators.",
        "Cancelled: its agent is blocked",
        "Not sent: the DID that started the job is blocked by the site's operators.",
    ),
    "key_revoked": OwnerRefusal(
        "The job was not run: the API key that started it was revoked by the site's operators.",
        "Cancelled: its API key is revoked",
        "Not sent: the API key that started the job was revoked by the site's operators.",
    ),
    "client_inactive": OwnerRefusal(
        "The job was not run: the agent client whose API key started it was made inactive by the site's operators.",
        "Cancelled: its agent client is inactive",
        "Not sent: the agent client whose API key started the job was made inactive by the site's operators.",
    ),
    # Set when the key is deleted (:func:`withdraw_deleted_keys_jobs`), not read by owner_refusal(): the key is gone.
    "key_deleted": OwnerRefusal(
        "The job was not run: the API key that started it was deleted by the site's operators.",
        "Cancelled: its API key was deleted",
        "Not sent: the API key that started the job was deleted by the site's operators.",
    ),
}


def owner_refusal(key_field: str = "api_key") -> Subquery:
    """A query expression: the code of :data:`OWNER_REFUSALS` that stops a row's API key (its field ``key_field``)
    from having work done for it now, or NULL.

    It is read where queued work would act for the key's holder (a worker claiming its job, a callback about to be
    sent), whenever and however the refusal was set (the admin, ``save()``, an ``update()``), as one subquery of the
    statement that locks the job anyway: no extra round trip, and the key's and client's rows are read, not locked
    (a joined row would be locked by ``FOR UPDATE``, and ``SKIP LOCKED`` would then skip the job while a request of
    the same key records its use). A job whose key was deleted has none (NULL): it is not refused here.

    Unlike :meth:`ApiKey.refusal <agent_handshake.models.ApiKey.refusal>`, which refuses new requests, an expiry
    does not count: it is the key's planned end, not an operator's judgement of its holder. A job the site accepted
    while the key was valid is run, however long it waited in the queue, and its result sent, signed with the key's
    secret, which the agent still holds: after the expiry the callback is its only way to that result, since its
    polls are refused with the key."""
    reason = Case(
        When(blocked_owner("pk"), then=Value("agent_blocked")),
        When(revoked_at__isnull=False, then=Value("key_revoked")),
        When(client__is_active=False, then=Value("client_inactive")),
        default=None,
        output_field=CharField(),
    )
    return Subquery(ApiKey.objects.filter(pk=OuterRef(key_field)).order_by().values(reason=reason)[:1])


def withdraw_deleted_keys_jobs(sender, instance: ApiKey, **kwargs) -> None:
    """``pre_delete`` of an API key (its admin page, its client's, a queryset's ``delete()``): the key's work ends
    with it, as with a revocation. Its queued jobs (those waiting for a retry too) and those waiting for an operator
    end ``cancelled``, code ``key_deleted``, and its callbacks still to be sent are given up; otherwise the jobs
    would lose their key (``SET NULL``) and run as if nobody had started them.

    A job a worker holds (claiming or running it) is skipped, not waited for: it finishes, and its callback, which
    the deleted key could not sign, is given up when it comes to be sent. (The delete still waits for that worker,
    to set the job's key to NULL.) Runs in the delete's transaction."""
    with transaction.atomic():
        held = Job.objects.select_for_update(skip_locked=True).filter(api_key=instance.pk)
        for job in held.filter(status__in=(Status.QUEUED, Status.WAITING)):
            job.owner_refusal = "key_deleted"
            _owner_refused(job)
        for job in held.filter(callback_state=Job.Callback.PENDING).exclude(status__in=Job.ACTIVE):
            job.owner_refusal = "key_deleted"
            _withhold_callback(job)
            job.save()


def _owner_refused(job: Job) -> None:
    """End a job that its owner's refusal (``job.owner_refusal``, :func:`owner_refusal`) caught before it ran:
    ``cancelled`` with the refusal's code, no callback. A cancellation the agent asked for is moot."""
    refusal = OWNER_REFUSALS[job.owner_refusal]
    job.status = Status.CANCELLED
    job.error = {"code": job.owner_refusal, "message": refusal.error}
    job.progress = refusal.progress
    job.finished_at = timezone.now()
    CancelRequest.objects.filter(job_id=job.pk).delete()
    if job.callback_url:
        _withhold_callback(job)
    job.save()


def cancel(job_id: str) -> Job:
    """Cancel a job that has not finished, and return it.

    A queued job is cancelled at once (a worker that later gets its message finds nothing to run), and so is one
    waiting for an operator (the human desk no longer takes an answer for it) and a running one whose worker died
    (no one holds its row lock). A running job's worker holds its
    row lock, so the request is written aside (:class:`~agent_handshake.models.CancelRequest`), without waiting:
    the worker discards the result and rolls back the handler's writes when the handler returns (a long handler
    may stop early: :meth:`Invocation.cancelled`). The job returned is then still ``running``; it is
    ``cancelled`` once the worker has seen the request. A request that arrives after the worker's last check
    (the capability has returned, its result is being committed) is too late: the job ends ``success`` and
    recovery deletes the request; but a job its worker puts on the desk (``waiting``) meanwhile is cancelled there,
    by whichever of this call and the worker looks last. A finished job is returned unchanged.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update(skip_locked=True).filter(pk=job_id).first()
        if job is None and Job.objects.filter(pk=job_id, status=Status.WAITING).exists():
            # A waiting job's lock is held briefly (an operator's answer, its expiry): wait for it.
            job = Job.objects.select_for_update().get(pk=job_id)
        if job is not None:
            # Unlocked, an active job has no worker on it (queued, waiting, or its worker died): cancel it now.
            if job.status in Job.ACTIVE:
                _cancelled(job)
            return job
        CancelRequest.objects.get_or_create(job_id=job_id)
    job = Job.objects.get(pk=job_id)  # a plain read does not wait for the worker's lock
    if job.status == Status.WAITING:
        # Its worker checked for a cancellation before this one was committed, then put the job on the desk, where
        # nothing reads the request: it is cancelled now (the worker also looks once more after its commit).
        return cancel(job_id)
    return job


def _fail(job: Job, code: str, message: str, **details: Any) -> None:
    job.status = Status.FAILED
    job.error = {"code": code, "message": message, **details}
    job.progress = message[:255]
    job.finished_at = timezone.now()
    _schedule_callback(job)
    job.save()


def _defer(job: Job, deferred: Deferred) -> None:
    job.status = Status.WAITING
    job.progress = deferred.progress[:255]
    job.needs_operator = deferred.needs_operator
    if deferred.eta_seconds is not None:
        job.eta_seconds = deferred.eta_seconds
    if deferred.expires_in is not None:
        job.expires_at = timezone.now() + datetime.timedelta(seconds=deferred.expires_in)
    if deferred.needs_operator:
        # The operators' email is owed from this commit until it is sent (``recover_after`` set on a waiting job:
        # :func:`~.desk.notify_operators` clears it). This worker sends it after its commit; if it dies first, or
        # the mail server refuses it, :func:`recover` sends it.
        job.recoveries, job.recover_after = 0, timezone.now()
    job.save()
    if deferred.needs_operator:
        from .desk import notify_operators

        transaction.on_commit(lambda: notify_operators(job.pk))


def complete_waiting(job_id: str, outcome: Outcome) -> Job:
    """Finish a job that waits for someone (the human desk); raises ``ActionFailed`` if it no longer waits.

    A job past its ``expires_at`` takes no answer, whether or not a poll or :func:`recover` has marked it expired
    yet: it expires now. Nor does one whose cancellation is on record (:func:`cancel`): it is cancelled now. Both
    are committed, though the answer is refused."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status == Status.WAITING:
            now = timezone.now()
            if job.expires_at is not None and job.expires_at <= now:
                _expired(job, now)
            elif cancel_requested(job.pk):
                _cancelled(job)
        refusal = None
        capability = capability_registry.get(job.capability)
        if job.status == Status.WAITING and not offered(capability):
            refusal = unoffered_message(job)
            if withdrawn_here(job):
                # Taken out of the registry while it waited: the request ends now, and the agent is told why.
                _fail(job, "unavailable", refusal)
            else:  # a newer release's, answered through an older process during a deploy: it goes on waiting
                refusal = f"The capability {job.capability!r} is not offered by this server yet; try again shortly."
        elif job.status != Status.WAITING:
            refusal = f"The job is {job.get_status_display()}; it no longer takes an answer."
        else:
            _complete(job, capability, check_output(capability, outcome))
    if refusal is not None:
        raise ActionFailed(refusal)
    return job


def _expired(job: Job, now: datetime.datetime) -> None:
    job.status = Status.EXPIRED
    job.progress = "No one answered in time; the request expired."
    job.finished_at = now
    _schedule_callback(job)
    job.save()


def expire(now: datetime.datetime | None = None, *, pk: Any = None) -> int:
    """Jobs whose wait ran out (or only job ``pk``, if its did) become ``expired`` (and their callbacks are sent)."""
    now = now or timezone.now()
    count = 0
    overdue = Job.objects.filter(status=Status.WAITING, expires_at__lte=now)
    if pk is not None:
        overdue = overdue.filter(pk=pk)
    with transaction.atomic():
        for job in overdue.select_for_update(skip_locked=True):
            _expired(job, now)
            count += 1
    return count


def withdraw_unoffered() -> int:
    """Waiting jobs whose capability the site no longer offers (a deploy that stopped registering the human desk)
    end ``failed`` with ``unavailable`` (and their callbacks are sent); how many. No one could answer them, and the
    agent would otherwise be told ``pending`` until their deadline. Only those that reached the desk before this
    process's registry took its shape (:func:`withdrawn_here`): an older process still running during a rolling deploy
    does not withdraw the requests of a capability the newer release added."""
    names = [capability.name for capability in capability_registry if offered(capability)]
    orphaned = Job.objects.filter(status=Status.WAITING, updated_at__lt=registry_shaped_at).exclude(
        capability__in=names
    )
    count = 0
    with transaction.atomic():
        for job in orphaned.select_for_update(skip_locked=True)[:500]:
            _fail(job, "unavailable", unoffered_message(job))
            count += 1
    return count


# --- callbacks --------------------------------------------------------------------------------------------------


def _schedule_callback(job: Job) -> None:
    if not job.callback_url:
        return
    job.recoveries, job.recover_after = 0, None  # the job's own recovery is over; its callback's begins
    job.callback_state = Job.Callback.PENDING
    job.callback_next_attempt_at = timezone.now()
    job_id = job.pk
    transaction.on_commit(lambda: _enqueue_callback(job_id))


def resend_callbacks(job_ids: Any) -> int:
    """Send the failed callbacks of these finished jobs again (an operator's action, once the agent's endpoint or
    the site's signing key works again); how many were queued. Each delivery starts afresh: its attempts from zero,
    retried as usual, and refused as usual at the time it is sent (a key revoked since gets nothing). Jobs that are
    not finished, have no callback, or whose callback did not fail are left as they are, as are rows a worker holds
    (a delivery under way)."""
    with transaction.atomic():
        failed = list(
            Job.objects.select_for_update(skip_locked=True)
            .filter(pk__in=job_ids, status__in=Job.FINAL, callback_state=Job.Callback.FAILED)
            .exclude(callback_url="")
        )
        for job in failed:
            _schedule_callback(job)
            job.callback_attempts = 0
            job.save(
                update_fields=[
                    "callback_state", "callback_attempts", "callback_next_attempt_at", "recoveries", "recover_after",
                    "updated_at",
                ]
            )  # fmt: skip
    return len(failed)


def _withhold_callback(job: Job) -> None:
    """Give the callback up unsent, for ``job.owner_refusal`` (the caller saves the job): recovery re-sends only
    pending ones, so taking the key back into use later sends nothing."""
    job.callback_state = Job.Callback.FAILED
    job.callback_last_error = OWNER_REFUSALS[job.owner_refusal].callback
    job.callback_next_attempt_at = None
    job.recoveries, job.recover_after = 0, None


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter: half the doubled delay fixed, half random ("equal jitter")."""
    delay = min(app_settings.CALLBACK_BACKOFF_MAX_SECONDS, app_settings.CALLBACK_BACKOFF_SECONDS * 2 ** (attempt - 1))
    return delay / 2 + random.uniform(0, delay / 2)


def callback_headers(job: Job, body: bytes) -> dict[str, str] | None:
    """The signature headers of a callback, or None when the key's secret cannot be recomputed."""
    key = job.api_key
    secret = key.secret() if key else None
    if secret is None:
        return None
    return {**callbacks.sign(secret, body), "X-AHP-Key-Id": key.key_id, "X-AHP-Session-Id": job.pk}


def deliver_callback(job_id: str) -> float | None:
    """One delivery attempt; returns the countdown to the next attempt, or None when there is none to make."""
    with transaction.atomic():
        job = (
            Job.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("api_key")
            .filter(pk=job_id, callback_state=Job.Callback.PENDING)
            .annotate(owner_refusal=owner_refusal())
            .first()
        )
        if job is None:
            return None
        if job.owner_refusal:  # not sent for a key the site has refused since, nor tried again
            _withhold_callback(job)
            job.save()
            return None
        now = timezone.now()
        job.callback_attempts += 1
        try:
            body = json.dumps(CALLBACK_RENDERERS[job.protocol](job), separators=(",", ":")).encode()
        except errors.Unavailable as error:
            # The site cannot form the body right now (an IntentWeb envelope without its signing key): not sent, the
            # reason kept where an operator reads it, and tried again like a receiver that cannot be reached.
            logger.warning("Job %s: its callback was not sent: %s", job.pk, error.message)
            result = callbacks.DeliveryResult(False, None, error.message, True, None, b"")
        else:
            headers = callback_headers(job, body)
            if headers is None:
                job.callback_state = Job.Callback.FAILED
                job.callback_last_error = (
                    "Not sent: no API key signs it (the key that started the job was deleted)."
                    if job.api_key is None
                    else "The API key's secret cannot be recomputed (SECRET_KEY changed); re-issue it."
                )
                job.save()
                return None
            result = callbacks.deliver(job.callback_url, body, headers)
        job.recoveries, job.recover_after = 0, None  # as in _claim
        job.callback_last_status = result.status
        job.callback_last_error = result.error[:255]
        countdown = None
        if result.delivered:
            job.callback_state = Job.Callback.DELIVERED
            job.callback_delivered_at = now
            job.callback_next_attempt_at = None
        elif result.retryable and job.callback_attempts < app_settings.CALLBACK_MAX_ATTEMPTS:
            countdown = _backoff(job.callback_attempts)
            job.callback_next_attempt_at = now + datetime.timedelta(seconds=countdown)
        else:
            job.callback_state = Job.Callback.FAILED
            job.callback_next_attempt_at = None
        job.save()
        return countdown


# --- recovery and clean-up --------------------------------------------------------------------------------------


#: The wait before recovery sends a message again doubles each time, up to this many times the recovery interval.
MAX_RECOVERY_BACKOFF = 64


def _postpone(jobs: QuerySet[Job], now: datetime.datetime, interval: float) -> list[str]:
    """Lock up to 500 of ``jobs`` (skipping rows a worker holds), push back their next recovery and return them.

    The first re-send waits one interval after the job was last touched, the next two intervals after that, then
    four...: a message that was really lost is sent again soon, while a job that only waits behind a backlog
    (its message still queued) is not sent again every interval, multiplying the backlog.
    """
    rows = list(jobs.select_for_update(skip_locked=True).values_list("pk", "recoveries")[:500])
    by_count: dict[int, list[str]] = defaultdict(list)
    for pk, count in rows:
        by_count[count].append(pk)
    for count, pks in by_count.items():
        wait = interval * min(2 ** (count + 1), MAX_RECOVERY_BACKOFF)
        Job.objects.filter(pk__in=pks).update(
            recoveries=count + 1, recover_after=now + datetime.timedelta(seconds=wait)
        )
    return [pk for pk, _ in rows]


def recover(now: datetime.datetime | None = None, *, recovery_seconds: int | None = None) -> dict[str, int]:
    """Send again what a lost message or a dead worker left behind (the operators' email about a desk request
    included); expire, end the waiting jobs of capabilities no longer offered (:func:`withdraw_unoffered`), and forget
    what is old.

    A job counts as left behind when it is queued or running, untouched for ``JOB_RECOVERY_SECONDS``, and no
    live worker holds its row lock. Sending it twice is harmless (see the module docstring).
    """
    now = now or timezone.now()
    if recovery_seconds is None:
        recovery_seconds = app_settings.JOB_RECOVERY_SECONDS
    cutoff = now - datetime.timedelta(seconds=recovery_seconds)
    due = Q(recover_after__isnull=True) | Q(recover_after__lte=now)
    with transaction.atomic():
        stale = _postpone(Job.objects.filter(due, status__in=ACTIVE, updated_at__lt=cutoff), now, recovery_seconds)
        lost_callbacks = _postpone(
            Job.objects.filter(due, callback_state=Job.Callback.PENDING, callback_next_attempt_at__lt=cutoff),
            now,
            recovery_seconds,
        )
        for job_id in stale:
            transaction.on_commit(lambda job_id=job_id: _enqueue(job_id))
        for job_id in lost_callbacks:
            transaction.on_commit(lambda job_id=job_id: _enqueue_callback(job_id))
        # Desk requests whose operators' email is still owed a while after they reached the desk (their worker died
        # before sending it, or the mail server refused it): the wait doubles as for a lost message.
        unmailed = _postpone(
            Job.objects.filter(
                status=Status.WAITING, needs_operator=True, recover_after__lte=now, updated_at__lt=cutoff
            ),
            now,
            recovery_seconds,
        )
    expired = expire(now)
    withdrawn = withdraw_unoffered()
    from .desk import notify_operators

    # Sent here, each under its row's lock and only while still owed: never twice, even beside the worker's own.
    mailed = sum(notify_operators(job_id) for job_id in unmailed)
    # A cancellation that arrived as its job finished: nothing reads it any more.
    CancelRequest.objects.filter(job_id__in=Job.objects.filter(status__in=Job.FINAL).values("pk")).delete()
    retention = now - datetime.timedelta(seconds=app_settings.JOB_RETENTION_SECONDS)
    purged = (
        Job.objects.filter(status__in=Job.FINAL, finished_at__lt=retention)
        .exclude(callback_state=Job.Callback.PENDING)
        .delete()[0]
    )
    return {
        "requeued": len(stale),
        "callbacks_requeued": len(lost_callbacks),
        "expired": expired,
        "purged": purged,
        "idempotency_purged": purge_expired(IdempotencyRecord, now),
        "signatures_purged": purge_expired(SeenSignature, now),
        "withdrawn": withdrawn,
        "desk_emails_sent": mailed,
    }


#: How long rows of each table are kept: idempotency records for ``IDEMPOTENCY_TTL``; accepted signatures for
#: twice the skew window (a replay older than that is refused for its timestamp anyway).
RETENTION: dict[type[models.Model], Callable[[], float]] = {
    IdempotencyRecord: lambda: app_settings.IDEMPOTENCY_TTL,
    SeenSignature: lambda: 2 * app_settings.SIGNATURE_MAX_SKEW,
}
#: What one write purges at most: a write path stays cheap, and each write still deletes more than it adds.
PURGE_BATCH = 100


def purge_expired(model: type[models.Model], now: datetime.datetime | None = None, *, limit: int | None = None) -> int:
    """Delete the rows of ``model`` (a key of :data:`RETENTION`) past their retention; at most ``limit``."""
    cutoff = (now or timezone.now()) - datetime.timedelta(seconds=RETENTION[model]())
    return model.forget_before(cutoff, limit=limit)


def purge_after_write(model: type[models.Model]) -> None:
    """What every new idempotency record or accepted signature does after its commit: purge a batch of expired
    rows, so the tables stay bounded on sites without Celery beat. A failure is logged, never a request's."""
    try:
        purge_expired(model, limit=PURGE_BATCH)
    except DatabaseError:
        logger.exception("Could not purge expired %s rows", model._meta.verbose_name)
