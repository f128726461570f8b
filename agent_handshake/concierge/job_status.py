"""An ``async`` job as the caller that started it reads it: found by its id, owned, and up to date.

Every front door that lets an agent follow its job (AHP's status URL, MCP's ``job_status`` tool, NLWeb's
``/await``, IntentWeb's next message) reads it here: only the API key that started a job may read it, and a job
whose wait for an operator ran out (``expires_at``) is expired by the read itself, so that no poll is told
``pending`` past the deadline (the jobs nobody reads are the ``recover_jobs`` task's). The doors render the job
each in its own shape, comparing its ``status`` with :data:`JobStatus`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils import timezone

from ..models import ConverseSession, Job
from . import errors, jobs, traffic

if TYPE_CHECKING:
    from ..identity.auth import Credentials

#: A job's statuses (``queued``, ``running``, ``waiting``, ``success``, ``failed``, ``expired``, ``cancelled``): the
#: model's own choices, named here so that a front door compares a job's status without importing the models.
JobStatus = Job.Status


def owned_job(
    job_id: str,
    credentials: Credentials,
    not_found: errors.NotFound,
    *,
    cancel: bool = False,
    noted_for_capability: bool = False,
) -> Job:
    """The job ``job_id`` that ``credentials`` started, up to date (:func:`up_to_date`), or cancelled first when
    ``cancel`` asks (:func:`~.jobs.cancel`). ``not_found`` is raised when no job has the id (each door names the id
    as its protocol does), :class:`~.errors.Forbidden` when other credentials started it. ``noted_for_capability``:
    the request is recorded in the traffic insights as one about the job's capability, refused or answered."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        raise not_found
    if noted_for_capability:
        traffic.note_capability(job.capability)
    if job.api_key_id != credentials.key.pk:
        raise errors.Forbidden("These credentials did not start this job.")
    if cancel:
        return jobs.cancel(job.pk)
    return up_to_date(job)


def up_to_date(job: Job) -> Job:
    """``job``, expired first if it waits past its ``expires_at``."""
    if job.status == JobStatus.WAITING and job.expires_at and job.expires_at <= timezone.now():
        jobs.expire(pk=job.pk)
        job.refresh_from_db()
    return job


def find(job_id: str | None) -> Job | None:
    """The job ``job_id`` (None: no id, or no such job; a finished job is purged after ``JOB_RETENTION_SECONDS``)."""
    return Job.objects.filter(pk=job_id).first() if job_id else None


def under_way(job: Job) -> bool:
    """Whether ``job`` is not finished yet: queued, running, or waiting for an operator."""
    return job.status in Job.ACTIVE


def seconds_left(job: Job) -> int | None:
    """The seconds ``job`` is still expected to take (its ``eta_seconds`` less the time since it was accepted, at
    least 0); None when it has no estimate."""
    if job.eta_seconds is None:
        return None
    elapsed = (timezone.now() - job.created_at).total_seconds()
    return max(0, int(job.eta_seconds - elapsed))


def in_conversation(job: Job, session_id: str | None) -> bool:
    """Whether ``job`` is a turn of the conversation ``session_id`` (the call that accepted it recorded it there)."""
    if not session_id:
        return False
    return ConverseSession.objects.filter(pk=session_id, turns__contains=[{"job": job.pk}]).exists()
