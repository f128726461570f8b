"""A finished job's callback (AHP §9): scheduled with the job's final state, delivered by a Celery worker.

The discipline is the job's own (:mod:`.jobs`): the callback's state lives on the job's row, scheduled in the
transaction that finishes the job and sent on commit; :func:`deliver_callback` holds the row lock while delivering
and saves the state after each attempt, retries with :func:`~.callbacks.backoff`, and a lost retry is sent again
by :func:`~.recovery.recover`. A callback is signed with the key that started the job and is not sent for a key
the site has refused since (:mod:`.job_owners`). :mod:`.callbacks` does the sending itself, safe against SSRF.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from ..conf import app_settings
from ..models import Job
from . import callbacks, errors
from .job_owners import owner_refusal, withhold_callback

logger = logging.getLogger(__name__)

#: Front door name -> ``render(job) -> JSON body`` of its callbacks (registered by the front door at start-up). A
#: renderer that cannot render now (IntentWeb's, while the site key does not load) raises
#: :class:`~.errors.Unavailable`: the attempt counts as one to an unreachable receiver, tried again with the backoff.
CALLBACK_RENDERERS: dict[str, Callable[[Job], dict[str, Any]]] = {}


def register_callback_renderer(protocol: str, render: Callable[[Job], dict[str, Any]]) -> None:
    CALLBACK_RENDERERS[protocol] = render


def enqueue_callback(job_id: str, countdown: float | None = None) -> None:
    """Queue one delivery attempt; called after the job's row is committed. A broker that cannot take the message is
    logged, not raised: the callback stays pending, and recovery sends it. The task is found by name, since
    ``agent_handshake.tasks`` defines it and calls this module."""
    try:
        current_app.tasks["agent_handshake.deliver_callback"].apply_async((job_id,), countdown=countdown)
    except Exception:
        logger.exception("Job %s: the broker did not take its callback; recovery will send it again", job_id)


def schedule_callback(job: Job) -> None:
    """Make ``job``'s callback, if it has one, pending, and queue its first attempt on commit (the caller saves the
    job, in the transaction that gives it its final state)."""
    if not job.callback_url:
        return
    job.recoveries, job.recover_after = 0, None  # the job's own recovery is over; its callback's begins
    job.callback_state = Job.Callback.PENDING
    job.callback_next_attempt_at = timezone.now()
    job_id = job.pk
    transaction.on_commit(lambda: enqueue_callback(job_id))


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
            schedule_callback(job)
            job.callback_attempts = 0
            job.save(
                update_fields=[
                    "callback_state", "callback_attempts", "callback_next_attempt_at", "recoveries", "recover_after",
                    "updated_at",
                ]
            )  # fmt: skip
    return len(failed)


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
            withhold_callback(job)
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
        job.recoveries, job.recover_after = 0, None  # a delivery happened: recovery starts over if the next is lost
        job.callback_last_status = result.status
        job.callback_last_error = result.error[:255]
        countdown = None
        if result.delivered:
            job.callback_state = Job.Callback.DELIVERED
            job.callback_delivered_at = now
            job.callback_next_attempt_at = None
        elif result.retryable and job.callback_attempts < app_settings.CALLBACK_MAX_ATTEMPTS:
            countdown = callbacks.backoff(job.callback_attempts)
            job.callback_next_attempt_at = now + datetime.timedelta(seconds=countdown)
        else:
            job.callback_state = Job.Callback.FAILED
            job.callback_next_attempt_at = None
        job.save()
        return countdown
