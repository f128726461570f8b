"""Celery tasks of the app (``shared_task``s, so they run on whatever Celery app the project configures).

Each takes plain strings and is safe to run twice: re-indexing compares content hashes, cleaning up deletes
what has expired. ``acks_late`` returns a task to the queue if the worker dies while running it.
"""

from __future__ import annotations

from celery import shared_task

from .retrieval.embeddings import EmbeddingUnavailable


@shared_task(
    name="agent_handshake.index_object",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=(EmbeddingUnavailable,),
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=8,
)
def index_object(app_label: str, model_name: str, pk: str) -> str:
    """Re-index one registered object after it was saved or deleted."""
    from . import state
    from .indexing import sync_and_index

    status = sync_and_index(app_label, model_name, pk)
    state.invalidate()
    return status


@shared_task(name="agent_handshake.cleanup_sessions", ignore_result=True)
def cleanup_sessions() -> int:
    """Delete converse sessions idle for longer than the session timeout."""
    from .ahp.sessions import delete_expired_sessions

    return delete_expired_sessions()
