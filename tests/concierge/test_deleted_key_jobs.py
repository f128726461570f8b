"""An API key an operator deletes (on its admin page, or with its agent client) stops acting for its holder in the work
it queued before, as a revoked key does (``tests/concierge/test_revoked_key_jobs.py``): its queued jobs, and those
waiting for a retry or for an operator, end ``cancelled`` with the code ``key_deleted`` and are not run, and no callback
is sent for any of its jobs. A job a worker is running is not cancelled under it: the delete waits for it (to set its
key NULL), the job finishes, and only its callback is withheld (it could not be signed anyway).

Before, a deleted key's jobs lost their key (``SET NULL``) and ran as if nobody had started them.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.db import connection

from agent_handshake import tasks
from agent_handshake.concierge import job_callbacks
from agent_handshake.models import ApiKey, Job
from tests.concierge.test_blocked_agent_jobs import start_report
from tests.concierge.test_callbacks import Receiver
from tests.concierge.test_revoked_key_jobs import Holder
from tests.testapp.models import Report

DELETED = "key_deleted"


def delete(how: str, holder: Holder, admin_client) -> None:
    """Delete the key as an operator would: its admin delete page, its client's, or in code."""
    if how == "key's admin page":
        url = f"/admin/agent_handshake/apikey/{holder.key.pk}/delete/"
    elif how == "client's admin page":
        url = f"/admin/agent_handshake/agentclient/{holder.key.client_id}/delete/"
    if how.endswith("admin page"):
        response = admin_client.post(url, {"post": "yes"})
        assert response.status_code == 302, response.content.decode()[:3000]
    else:
        ApiKey.objects.filter(pk=holder.key.pk).delete()
    assert not ApiKey.objects.filter(pk=holder.key.pk).exists()


def assert_withheld(job: Job) -> None:
    assert job.callback_state == Job.Callback.FAILED
    assert job.callback_last_error.startswith("Not sent: ")
    assert "deleted" in job.callback_last_error
    assert job.callback_attempts == 0


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["key's admin page", "client's admin page", "queryset"])
def test_a_queued_job_of_a_deleted_key_is_not_run_and_no_callback_is_sent(client, admin_client, how):
    holder, other = Holder(), Holder("Other Co")
    hook = Receiver().start()
    try:
        queued = start_report(client, holder, hook.url())
        retrying = start_report(client, holder, hook.url())
        Job.objects.filter(pk=retrying).update(attempts=1)  # it crashed once and waits for its next attempt
        finished = start_report(client, holder, hook.url())
        assert tasks.run_job(finished) == Job.Status.SUCCESS  # its callback is still to be sent
        others = start_report(client, other, hook.url())

        delete(how, holder, admin_client)

        for job_id in (queued, retrying):
            assert tasks.run_job(job_id) == "skipped"  # the worker's task, run here: it ran nothing
            job = Job.objects.get(pk=job_id)
            assert job.status == Job.Status.CANCELLED
            assert job.error["code"] == DELETED
            assert job.error["message"].startswith("The job was not run: ")
            assert "deleted" in job.error["message"]
            assert not Report.objects.filter(job_id=job_id).exists()
            assert_withheld(job)
            page = admin_client.get(f"/admin/agent_handshake/job/{quote(job_id)}/change/").content.decode()
            assert DELETED in page
        assert_withheld(Job.objects.get(pk=finished))
        for job_id in (queued, retrying, finished):
            assert job_callbacks.deliver_callback(job_id) is None
        assert hook.requests == []

        # Another key's job is not touched.
        assert tasks.run_job(others) == Job.Status.SUCCESS
        assert job_callbacks.deliver_callback(others) is None
        assert len(hook.requests) == 1
    finally:
        hook.stop()


@pytest.mark.django_db
def test_a_job_waiting_for_an_operator_is_cancelled_when_its_key_is_deleted(client, admin_client):
    holder = Holder()
    job_id = start_report(client, holder)
    Job.objects.filter(pk=job_id).update(status=Job.Status.WAITING, needs_operator=True)
    delete("key's admin page", holder, admin_client)
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.CANCELLED
    assert job.error["code"] == DELETED


@pytest.mark.django_db(transaction=True)
def test_a_running_job_of_a_deleted_key_finishes_and_its_callback_is_withheld():
    """A worker holds the row of the job it runs; the delete does not cancel the job under it (it waits for the
    worker, as its ``SET NULL`` of the job's key must): the job finishes, and its callback, which the deleted key
    could not sign, is withheld."""
    holder = Holder()
    hook = Receiver().start()
    job = Job.objects.create(
        capability="compile_report",
        api_key=holder.key,
        input={"topic": "kabusecha", "seconds": 2},
        callback_url=hook.url(),
    )
    ran = []

    def worker():
        try:
            ran.append(tasks.run_job(job.pk))
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while Job.objects.get(pk=job.pk).status != Job.Status.RUNNING:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ApiKey.objects.filter(pk=holder.key.pk).delete()
        thread.join(30)
        assert ran == [Job.Status.SUCCESS]
        finished = Job.objects.get(pk=job.pk)
        assert finished.status == Job.Status.SUCCESS
        assert Report.objects.filter(job_id=job.pk).exists()
        assert job_callbacks.deliver_callback(job.pk) is None
        assert hook.requests == []
        assert "deleted" in Job.objects.get(pk=job.pk).callback_last_error
    finally:
        thread.join(30)
        hook.stop()
