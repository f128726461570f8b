"""Recovery sends a backlogged job's message again with a growing wait; expired replay and idempotency rows are
purged by the writes themselves, with or without Celery beat."""

from __future__ import annotations

import datetime
import json

import pytest
from celery.signals import before_task_publish
from django.core.management import call_command
from django.utils import timezone

from agent_handshake.concierge.jobs import run
from agent_handshake.concierge.recovery import recover
from agent_handshake.identity.auth import sign_request
from agent_handshake.models import AgentClient, ApiKey, IdempotencyRecord, Job, SeenSignature
from demo_site.shop.models import Product

pytestmark = pytest.mark.django_db
CONVERSE = "/agent/converse"


@pytest.fixture
def published():
    """The ``run_job`` messages sent to the broker (the filesystem transport of tests/settings.py)."""
    sent: list[str] = []

    def record(sender=None, body=None, **kwargs):
        if sender == "agent_handshake.run_job":
            sent.append(body[0][0])

    before_task_publish.connect(record, weak=False)
    yield sent
    before_task_publish.disconnect(record)


def tick(capture, now):
    """One beat tick of the recovery task, its messages sent on commit as the task's would be."""
    with capture(execute=True):
        return recover(now)


def test_a_backlogged_job_is_sent_again_with_a_doubling_wait(published, django_capture_on_commit_callbacks):
    job = Job.objects.create(capability="compile_report")  # queued; its message waits behind a backlog
    start = Job.objects.get(pk=job.pk).updated_at
    second = datetime.timedelta(seconds=1)
    interval = datetime.timedelta(seconds=30)  # JOB_RECOVERY_SECONDS

    assert tick(django_capture_on_commit_callbacks, start + interval + second)["requeued"] == 1
    # Another interval later the job is still queued (the backlog, not a lost message): not sent again yet...
    assert tick(django_capture_on_commit_callbacks, start + 2 * (interval + second))["requeued"] == 0
    assert published == [job.pk]
    # ... but after twice the interval, then four times.
    assert tick(django_capture_on_commit_callbacks, start + 3 * interval + 2 * second)["requeued"] == 1
    assert tick(django_capture_on_commit_callbacks, start + 6 * interval)["requeued"] == 0
    assert tick(django_capture_on_commit_callbacks, start + 7 * interval + 3 * second)["requeued"] == 1
    assert published == [job.pk] * 3


def test_a_job_taken_up_by_a_worker_is_recovered_at_the_interval_again(published, django_capture_on_commit_callbacks):
    job = Job.objects.create(capability="no_such_capability")
    start = Job.objects.get(pk=job.pk).updated_at
    interval = datetime.timedelta(seconds=31)
    for step in (1, 2):
        tick(django_capture_on_commit_callbacks, start + step * interval)
    assert Job.objects.get(pk=job.pk).recoveries == 1
    Job.objects.filter(pk=job.pk).update(status=Job.Status.QUEUED)
    run(job.pk)  # a worker takes the message up (the job fails: its capability is gone)
    job.refresh_from_db()
    assert (job.recoveries, job.recover_after) == (0, None)


def issue():
    client, _ = AgentClient.objects.get_or_create(name="Purging agent")
    return ApiKey.objects.issue(client, scopes=["*"])


def age(model, rows, seconds):
    model.objects.filter(pk__in=[row.pk for row in rows]).update(
        created_at=timezone.now() - datetime.timedelta(seconds=seconds)
    )


def test_accepted_signatures_purge_expired_ones_without_beat(client, django_capture_on_commit_callbacks):
    old = SeenSignature.objects.bulk_create(SeenSignature(signature=f"{n:064x}") for n in range(105))
    age(SeenSignature, old, 601)  # past twice SIGNATURE_MAX_SKEW (300 s)
    recent = SeenSignature.objects.create(signature="f" * 64)
    age(SeenSignature, [recent], 30)
    _, secret = issue()

    for question in ("Who are you?", "What do you sell?"):  # each accepted signature purges up to 100 (PURGE_BATCH)
        body = json.dumps({"capability": "site_info", "query": question}).encode()
        with django_capture_on_commit_callbacks(execute=True):
            signed = sign_request(secret, "POST", CONVERSE, body)
            response = client.post(CONVERSE, body, content_type="application/json", headers=signed)
        assert response.status_code == 200, response.json()

    assert not SeenSignature.objects.filter(pk__in=[row.pk for row in old]).exists()
    assert SeenSignature.objects.filter(pk=recent.pk).exists()
    assert SeenSignature.objects.count() == 3  # the recent one and the two just accepted


def test_idempotency_records_purge_expired_ones_without_beat(client, django_capture_on_commit_callbacks):
    call_command("loaddata", "demo", app_label="shop", verbosity=0)
    key, secret = issue()
    old = [
        IdempotencyRecord.objects.create(api_key=key, key=f"old-{n}", request_hash="x", status_code=200, body={})
        for n in range(3)
    ]
    age(IdempotencyRecord, old, 86400 + 1)  # past IDEMPOTENCY_TTL
    body = {"capability": "check_inventory", "query": Product.objects.first().sku}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            CONVERSE,
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": "fresh"},
        )
    assert response.status_code == 200, response.json()
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]


def test_cancelling_a_job_whose_worker_died_cancels_it_at_once(published, django_capture_on_commit_callbacks):
    """A running job nobody holds (its worker died) is cancelled on the spot, and recovery never sends it again."""
    from agent_handshake.concierge.jobs import cancel
    from agent_handshake.models import CancelRequest

    job = Job.objects.create(capability="compile_report", status=Job.Status.RUNNING, attempts=1)
    cancelled = cancel(job.pk)
    assert cancelled.status == Job.Status.CANCELLED
    assert cancelled.error["code"] == "cancelled"
    assert not CancelRequest.objects.exists()
    later = Job.objects.get(pk=job.pk).updated_at + datetime.timedelta(hours=1)
    assert tick(django_capture_on_commit_callbacks, later)["requeued"] == 0
    assert published == []
    assert run(job.pk) == "skipped"
