"""A job's owner refused: the work an API key queued ends when the site's operators refuse the key's holder.

A job acts on behalf of whoever started it, so an operator's refusal of its key reaches the work the key queued
before: a verified agent's block (``VerifiedAgent.blocked``, code ``agent_blocked``), the key's revocation
(``ApiKey.revoked_at``, ``key_revoked``) or its client's deactivation (``AgentClient.is_active``,
``client_inactive``). The claim of such a job ends it ``cancelled`` with that code without running it
(:func:`cancel_for_owner`), and its callback is given up, with the reason, instead of sent
(:func:`withhold_callback`). A job already running is not interrupted; only its callback is withheld. Each refusal
is read by one subquery of the statement that locks the job anyway (:func:`owner_refusal`), and taking the key back
into use revives nothing. A key's expiry is no such refusal: see :func:`owner_refusal`. Deleting the key ends its
queued work at once (:func:`withdraw_deleted_keys_jobs`, code ``key_deleted``).
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import transaction
from django.db.models import Case, CharField, OuterRef, Subquery, Value, When
from django.utils import timezone

from ..identity.trust import blocked_owner
from ..models import ApiKey, CancelRequest, Job

Status = Job.Status


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


def withhold_callback(job: Job) -> None:
    """Give the callback up unsent, for ``job.owner_refusal`` (the caller saves the job): recovery re-sends only
    pending ones, so taking the key back into use later sends nothing."""
    job.callback_state = Job.Callback.FAILED
    job.callback_last_error = OWNER_REFUSALS[job.owner_refusal].callback
    job.callback_next_attempt_at = None
    job.recoveries, job.recover_after = 0, None


def cancel_for_owner(job: Job) -> None:
    """End a job that its owner's refusal (``job.owner_refusal``, :func:`owner_refusal`) caught before it ran:
    ``cancelled`` with the refusal's code, no callback. A cancellation the agent asked for is moot."""
    refusal = OWNER_REFUSALS[job.owner_refusal]
    job.status = Status.CANCELLED
    job.error = {"code": job.owner_refusal, "message": refusal.error}
    job.progress = refusal.progress
    job.finished_at = timezone.now()
    CancelRequest.objects.filter(job_id=job.pk).delete()
    if job.callback_url:
        withhold_callback(job)
    job.save()


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
            cancel_for_owner(job)
        for job in held.filter(callback_state=Job.Callback.PENDING).exclude(status__in=Job.ACTIVE):
            job.owner_refusal = "key_deleted"
            withhold_callback(job)
            job.save()
