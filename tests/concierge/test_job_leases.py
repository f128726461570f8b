"""Job workers behind a connection pooler in transaction mode (PgBouncer): what keeps a second delivery off a job
lives in the job's row, never in a database session, and a claim whose worker died stops keeping others off."""

from __future__ import annotations

import datetime
import threading

import pytest
from django.db import connection
from django.utils import timezone

from agent_handshake.concierge.jobs import CLAIM_LEASE
from agent_handshake.models import Job
from agent_handshake.tasks import run_job
from tests.concierge.test_jobs import HeldAfterClaim, key_with_secret
from tests.testapp.models import Report

pytestmark = pytest.mark.django_db(transaction=True)


def test_between_its_claim_and_its_run_a_worker_holds_nothing_in_its_database_session():
    """A pooler in transaction mode gives the worker's server connection to other clients between two of its
    transactions: a lock still held there (a session-level advisory lock) would be released on another server
    connection, or never, and keep every later delivery off the job."""
    key, _ = key_with_secret()
    job = Job.objects.create(capability="compile_report", api_key=key, input={"topic": "sencha"})
    held = HeldAfterClaim()
    worker: dict[str, object] = {}

    def deliver():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                worker["pid"] = cursor.fetchone()[0]
            with connection.execute_wrapper(held):
                worker["status"] = run_job.apply((job.pk,)).get()
        finally:
            connection.close()

    thread = threading.Thread(target=deliver)
    thread.start()
    try:
        assert held.claimed.wait(30), "the worker did not claim the job"
        with connection.cursor() as cursor:
            cursor.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [worker["pid"]])
            assert cursor.fetchone()[0] == "idle"  # between two transactions: what a pooler hands to others
            cursor.execute("SELECT locktype, mode FROM pg_locks WHERE pid = %s", [worker["pid"]])
            assert cursor.fetchall() == []
    finally:
        held.go_on.set()
        thread.join(30)
    assert worker["status"] == "success"
    assert Job.objects.get(pk=job.pk).attempts == 1


def test_a_claim_whose_worker_died_keeps_other_deliveries_off_only_for_the_lease():
    """A job left running by a worker that died after its claim (nothing holds its row) is left alone by a delivery
    while the claim is fresh (its worker may be about to lock the row), uncounted; once the claim is older than
    CLAIM_LEASE, the next delivery takes it, as another attempt, and finishes it."""
    key, _ = key_with_secret()
    job = Job.objects.create(
        capability="compile_report",
        api_key=key,
        input={"topic": "hojicha"},
        status=Job.Status.RUNNING,
        attempts=1,
        started_at=timezone.now(),
    )
    assert run_job.apply((job.pk,)).get() == "skipped"
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("running", 1)
    assert not Report.objects.filter(job_id=job.pk).exists()

    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - CLAIM_LEASE - datetime.timedelta(seconds=1))
    assert run_job.apply((job.pk,)).get() == "success"
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("success", 2)
    assert Report.objects.filter(job_id=job.pk).count() == 1
