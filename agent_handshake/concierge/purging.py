"""Forgetting what is old: finished jobs past their retention, settled cancellations, idempotency records and
accepted signatures past theirs.

The recovery (:func:`~.recovery.recover`) purges all of them on the beat schedule; every new idempotency record or
accepted signature also purges a bounded batch of its own table (:func:`purge_after_write`), so those tables stay
bounded on sites without Celery beat.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable

from django.db import DatabaseError, models
from django.utils import timezone

from ..conf import app_settings
from ..models import CancelRequest, IdempotencyRecord, Job, SeenSignature

logger = logging.getLogger(__name__)

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


def forget_settled_cancellations() -> None:
    """Delete the cancellation requests of finished jobs: one that arrived as its job finished is read by no one."""
    CancelRequest.objects.filter(job_id__in=Job.objects.filter(status__in=Job.FINAL).values("pk")).delete()


def purge_finished_jobs(now: datetime.datetime) -> int:
    """Delete the jobs finished longer than ``JOB_RETENTION_SECONDS`` before ``now`` whose callback is not still
    to be sent; how many."""
    retention = now - datetime.timedelta(seconds=app_settings.JOB_RETENTION_SECONDS)
    return (
        Job.objects.filter(status__in=Job.FINAL, finished_at__lt=retention)
        .exclude(callback_state=Job.Callback.PENDING)
        .delete()[0]
    )
