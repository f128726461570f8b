"""Celery tasks of the app (``shared_task``s, so they run on whatever Celery app the project configures).

Each takes plain strings and is safe to run twice: re-indexing compares content hashes, cleaning up deletes
what has expired. ``acks_late`` returns a task to the queue if the worker dies while running it.
"""

from __future__ import annotations

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval

from . import state
from .concierge import input_pool, job_callbacks, jobs, recovery
from .concierge.conversation import delete_expired_interactions, delete_expired_sessions
from .identity.trust import forget_old_events
from .indexing import index_batch, sync_and_index
from .insights.aggregation import run_daily
from .insights.gaps import update_gaps
from .retrieval.embeddings import EmbeddingUnavailable

#: Tasks that embed text: back to the queue if the worker dies, and retried with backoff while the embedding
#: backend is unavailable.
EMBEDDING_TASK = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "autoretry_for": (EmbeddingUnavailable,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "max_retries": 8,
}


@shared_task(name="agent_handshake.index_object", **EMBEDDING_TASK)
def index_object(app_label: str, model_name: str, pk: str) -> str:
    """Re-index one registered object after it was saved or deleted."""
    status = sync_and_index(app_label, model_name, pk)
    state.invalidate()
    return status


@shared_task(
    name="agent_handshake.index_objects",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=EMBEDDING_TASK["max_retries"],
)
def index_objects(self, app_label: str, model_name: str, pks: list[str]) -> dict[str, int]:
    """Re-index a batch of one registered model's objects (what a save of an object they follow queues), each as
    :func:`index_object` does. An object that cannot be indexed is logged and the others are indexed; while the
    embedding backend is unavailable, the task is retried with backoff for the objects not indexed yet."""
    try:
        counts, left, unavailable = index_batch(app_label, model_name, pks)
    finally:
        state.invalidate()
    if left:
        countdown = get_exponential_backoff_interval(
            factor=1, retries=self.request.retries, maximum=EMBEDDING_TASK["retry_backoff_max"], full_jitter=True
        )
        raise self.retry(args=(app_label, model_name, left), exc=unavailable, countdown=countdown)
    return counts


@shared_task(name="agent_handshake.cleanup_sessions", ignore_result=True)
def cleanup_sessions() -> int:
    """Delete converse sessions idle for longer than the session timeout, IntentWeb interactions and nonces past
    their retention, schema template fragments and verified agents' request events past theirs; cluster the
    fragments no pool update took yet."""
    delete_expired_interactions()
    input_pool.forget_expired()
    forget_old_events()
    input_pool.update_all()
    return delete_expired_sessions()


@shared_task(name="agent_handshake.run_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: str) -> str:
    """Run an async capability's job (see :mod:`agent_handshake.concierge.jobs` for why running it twice is safe)."""
    return jobs.run(job_id)


@shared_task(
    name="agent_handshake.deliver_callback",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,  # the attempt count lives on the job (CALLBACK_MAX_ATTEMPTS)
)
def deliver_callback(self, job_id: str) -> None:
    """One callback attempt; schedules the next one, with backoff, when it must be retried."""
    countdown = job_callbacks.deliver_callback(job_id)
    if countdown is not None:
        self.apply_async((job_id,), countdown=countdown)


@shared_task(name="agent_handshake.recover_jobs", ignore_result=True)
def recover_jobs() -> dict[str, int]:
    """Re-send jobs and callbacks whose messages were lost, expire unanswered desk requests, end those whose
    capability is no longer offered, purge old rows."""
    return recovery.recover()


@shared_task(name="agent_handshake.update_input_pool", **EMBEDDING_TASK)
def update_input_pool(capability: str) -> int:
    """Cluster a capability's new free-text fragments (schema templates' ``other``); how many keys it proposed."""
    return len(input_pool.update(capability))


@shared_task(name="agent_handshake.insights_daily", acks_late=True, reject_on_worker_lost=True)
def insights_daily() -> dict[str, object]:
    """Aggregate every closed day of agent traffic not aggregated yet, then purge the raw rows past
    ``INSIGHTS_RETENTION_DAYS`` (only days whose aggregates count them all). Safe to run twice, or hourly."""
    return run_daily()


@shared_task(name="agent_handshake.update_content_gaps", **EMBEDDING_TASK)
def update_content_gaps() -> int:
    """Group the questions agents got no answer (or only weak matches) for into content gaps; how many it grouped.
    Two runs at once do not overlap: the second finds the first's lock and returns 0."""
    return update_gaps()
