"""Recovery of async work left behind (the ``agent_handshake.recover_jobs`` beat task, ``manage.py
agent_recover_jobs``): jobs and callbacks whose Celery messages were lost, desk emails still owed, desk requests
past their deadline, waiting jobs of capabilities no longer offered, and old rows.

A Celery message only says "run job X" (or "deliver X's callback"): the state is the job's row. A message lost on a
broker that does not redeliver after a worker dies leaves a row that nobody moves; recovery finds such rows and sends
their messages again. Sending one twice is harmless (see :mod:`.jobs`), but a job that only waits behind a backlog is
not sent again every time (:func:`_postpone`).
"""

from __future__ import annotations

import datetime
from collections import defaultdict

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..conf import app_settings
from ..models import IdempotencyRecord, Job, SeenSignature
from .desk import notify_operators
from .job_callbacks import enqueue_callback
from .jobs import ACTIVE, enqueue, expire, withdraw_unoffered
from .purging import forget_settled_cancellations, purge_expired, purge_finished_jobs

Status = Job.Status

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
    included); expire, end the waiting jobs of capabilities no longer offered (:func:`~.jobs.withdraw_unoffered`),
    and forget what is old (:mod:`.purging`).

    A job counts as left behind when it is queued or running, untouched for ``JOB_RECOVERY_SECONDS``, and no
    live worker holds its row lock. Sending it twice is harmless (see :mod:`.jobs`).
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
            transaction.on_commit(lambda job_id=job_id: enqueue(job_id))
        for job_id in lost_callbacks:
            transaction.on_commit(lambda job_id=job_id: enqueue_callback(job_id))
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
    # Sent here, each under its row's lock and only while still owed: never twice, even beside the worker's own.
    mailed = sum(notify_operators(job_id) for job_id in unmailed)
    forget_settled_cancellations()
    purged = purge_finished_jobs(now)
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
