"""A desk request cancelled by its agent while the worker puts it on the desk."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.db import connection

from agent_handshake.concierge.jobs import run
from agent_handshake.models import CancelRequest, Job
from tests.concierge.test_desk_deadline import answer, escalate, issue, poll


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["the cancellation", "the worker"])
def test_a_cancellation_sent_while_the_worker_puts_the_request_on_the_desk_is_not_lost(client, admin_client, first):
    """The worker checks for a cancellation once the handler returns, then commits ``waiting``. An agent's cancel
    between the two was written aside for a worker that never reads it again: the request stayed on the desk,
    "pending" to the agent, and an operator's answer completed the job the agent had cancelled. Whichever of the
    two commits first (the cancellation, or the worker's ``waiting`` and its look for one after it), the job ends
    cancelled."""
    _, secret = issue()
    job_id = escalate(client, secret, "Please call me about a custom blend.")
    deferred, go_on = threading.Event(), threading.Event()
    outcome: dict[str, str] = {}

    def after_waiting_is_written(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith('UPDATE "agent_handshake_job"') and "waiting" in (params or ()):
            deferred.set()  # written, not committed: the worker has checked for a cancellation already
            go_on.wait(30)
        return result

    def worker():
        try:
            with connection.execute_wrapper(after_waiting_is_written):
                outcome["status"] = run(job_id)
        finally:
            connection.close()

    def worker_finishes_before_the_cancellation_commits(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith('INSERT INTO "agent_handshake_cancelrequest"'):
            go_on.set()
            thread.join(30)
        return result

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert deferred.wait(30), "the worker did not defer the job"
        with contextlib.ExitStack() as stack:
            if first == "the worker":
                stack.enter_context(connection.execute_wrapper(worker_finishes_before_the_cancellation_commits))
            response = client.post(
                "/await",
                {"promise_token": job_id, "action": "cancel", "meta": {"api_version": "0.54"}},
                content_type="application/json",
                headers={"Authorization": f"Bearer {secret}"},
            )
        assert response.status_code in (200, 202), response.json()
    finally:
        go_on.set()
        thread.join(30)
    assert outcome, "the worker did not finish"

    polled = poll(client, secret, job_id)
    assert (polled["status"], polled["error"]["code"]) == ("failed", "cancelled")
    answer(admin_client, job_id, "Of course, tomorrow at ten.")
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.CANCELLED
    assert job.result is None
    assert not CancelRequest.objects.filter(job_id=job_id).exists()
