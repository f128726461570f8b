"""Async jobs (AHP §6.4, §9): accepted at once, run on a Celery worker, read by polling or delivered by callback.

This module holds a job's life cycle: accepted (``queued``), claimed and run (``running``), then ``success``,
``failed``, ``cancelled``, or ``waiting`` for someone (the human desk) until answered or ``expired``. Beside it,
:mod:`.job_callbacks` delivers a finished job's callback, :mod:`.job_owners` ends the work of an owner the site's
operators refused, :mod:`.recovery` sends lost messages again and :mod:`.purging` deletes old rows.

Nothing is lost and nothing is done twice:

- The job is a row in PostgreSQL, created in the request's transaction; the Celery message, sent on commit,
  only says "run job X". A lost message (the filesystem broker does not redeliver after a worker dies) is sent
  again by :func:`~.recovery.recover`, which the beat schedule runs (``agent_handshake.recover_jobs``).
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

A job acts on behalf of whoever started it: a job whose owner the site's operators refused since it was queued (a
blocked DID, a revoked key, an inactive client: :func:`~.job_owners.owner_refusal`) ends ``cancelled`` when a
worker claims it, unrun. A scope the key has lost since the job was accepted (or that a deploy put its capability
under) fails the job ``forbidden`` when a worker takes it up, unrun, as the key's next call would be refused.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from ..conf import app_settings
from ..identity.trust import scopes_of
from ..models import ApiKey, CancelRequest, Job, VerifiedAgent
from ..registry import Capability, capability_registry
from ..signals import registry_changed
from ..text import visible_name
from . import callbacks, errors
from .desk import notify_operators
from .invocation import (
    ActionFailed,
    Deferred,
    Invocation,
    Outcome,
    OutputInvalid,
    check_output,
)
from .job_callbacks import schedule_callback
from .job_owners import cancel_for_owner, owner_refusal

logger = logging.getLogger(__name__)
Status = Job.Status
ACTIVE = [Status.QUEUED, Status.RUNNING]


def enqueue(job_id: str, countdown: float | None = None) -> None:
    """Send job ``job_id`` to a worker; called after the job's row is committed. A broker that cannot take the message
    must not fail the request (an agent told "500" about a job it was in fact given would start it again): the
    failure is logged, the row stays, and recovery sends it. The task is found by name, since
    ``agent_handshake.tasks`` defines it and calls this module."""
    try:
        current_app.tasks["agent_handshake.run_job"].apply_async((job_id,), countdown=countdown)
    except Exception:
        logger.exception("Job %s: the broker did not take its message; recovery will send it again", job_id)


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
    transaction.on_commit(lambda: enqueue(job.pk))
    return job


def outcome_of(job: Job) -> Outcome | None:
    """A finished job's outcome (None unless it succeeded)."""
    if job.status != Status.SUCCESS or not job.result:
        return None
    result = job.result
    return Outcome(result.get("data") or {}, result.get("answer") or "", list(result.get("side_effects") or []))


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
            cancel_for_owner(job)
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
        job_id, countdown = job.pk, callbacks.backoff(job.attempts)
        transaction.on_commit(lambda: enqueue(job_id, countdown))
    else:
        _fail(job, "concierge_error", "The capability failed; the error was logged.")


def _complete(job: Job, capability: Capability, outcome: Outcome) -> None:
    # The outcome's data, not a protocol's body: each front door renders a finished job its own way.
    job.result = {"data": outcome.data, "answer": outcome.answer, "side_effects": outcome.side_effects}
    job.status = Status.SUCCESS
    job.progress = "Done"
    job.finished_at = timezone.now()
    schedule_callback(job)
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
    schedule_callback(job)
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
    schedule_callback(job)
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
        # the mail server refuses it, :func:`~.recovery.recover` sends it.
        job.recoveries, job.recover_after = 0, timezone.now()
    job.save()
    if deferred.needs_operator:
        transaction.on_commit(lambda: notify_operators(job.pk))


def complete_waiting(job_id: str, outcome: Outcome) -> Job:
    """Finish a job that waits for someone (the human desk); raises ``ActionFailed`` if it no longer waits.

    A job past its ``expires_at`` takes no answer, whether or not a poll or :func:`~.recovery.recover` has marked it
    expired yet: it expires now. Nor does one whose cancellation is on record (:func:`cancel`): it is cancelled now.
    Both are committed, though the answer is refused."""
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
    schedule_callback(job)
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
