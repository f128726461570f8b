"""An operator sends a failed callback again from the admin's job list ("Send the callbacks again"): after the agent's
endpoint was down longer than the retries last, or the site's signing key was broken for hours. The delivery
starts afresh (its attempts from zero, with the usual retries), and every rule of the first delivery holds again:
a key the site has refused since (revoked, its client inactive, its DID blocked) still gets nothing. Only finished
jobs whose callback failed are sent again; the others are left as they are and counted. Only staff who may change
jobs see the action."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from agent_handshake import tasks
from agent_handshake.concierge import job_callbacks
from agent_handshake.models import Job
from tests.concierge.test_blocked_agent_jobs import start_report
from tests.concierge.test_callbacks import Receiver
from tests.concierge.test_revoked_key_jobs import Holder, revoke

pytestmark = pytest.mark.django_db

JOBS = "/admin/agent_handshake/job/"


def failed_callback(client, holder: Holder) -> tuple[str, Receiver]:
    """A finished job whose callback failed for good: its receiver answered 410 (not retried)."""
    hook = Receiver(status=410).start()
    job_id = start_report(client, holder, hook.url())
    assert tasks.run_job(job_id) == Job.Status.SUCCESS
    assert job_callbacks.deliver_callback(job_id) is None
    job = Job.objects.get(pk=job_id)
    assert (job.callback_state, job.callback_last_status, len(hook.requests)) == (Job.Callback.FAILED, 410, 1)
    return job_id, hook


def resend(admin_client, *job_ids: str):
    response = admin_client.post(JOBS, {"action": "resend_callbacks", "_selected_action": list(job_ids)}, follow=True)
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


def test_a_failed_callback_sent_again_is_delivered_afresh(client, admin_client, django_capture_on_commit_callbacks):
    holder = Holder()
    job_id, hook = failed_callback(client, holder)
    try:
        hook.status = 200  # the agent fixed its endpoint
        with django_capture_on_commit_callbacks(execute=True) as queued:
            messages = resend(admin_client, job_id)
        assert messages == ["1 callback(s) queued to be sent again."]
        assert len(queued) == 1  # the delivery is queued once the change is committed
        job = Job.objects.get(pk=job_id)
        assert job.callback_state == Job.Callback.PENDING
        assert job.callback_attempts == 0  # the retries start afresh
        assert job_callbacks.deliver_callback(job_id) is None  # the worker's task, run here
        job = Job.objects.get(pk=job_id)
        assert (job.callback_state, job.callback_last_status, job.callback_attempts) == (
            Job.Callback.DELIVERED,
            200,
            1,
        )
        assert len(hook.requests) == 2
        assert hook.requests[1]["body"] == hook.requests[0]["body"]  # the same result
    finally:
        hook.stop()


def test_a_callback_of_a_key_refused_since_is_still_not_sent(client, admin_client, django_capture_on_commit_callbacks):
    holder = Holder()
    job_id, hook = failed_callback(client, holder)
    try:
        hook.status = 200
        revoke("update", holder.key)
        with django_capture_on_commit_callbacks(execute=True):
            resend(admin_client, job_id)
        assert job_callbacks.deliver_callback(job_id) is None
        job = Job.objects.get(pk=job_id)
        assert job.callback_state == Job.Callback.FAILED
        assert "revoked" in job.callback_last_error
        assert len(hook.requests) == 1  # only the first, failed delivery
    finally:
        hook.stop()


def test_jobs_whose_callback_did_not_fail_are_left_alone(client, admin_client, django_capture_on_commit_callbacks):
    holder = Holder()
    hook = Receiver().start()
    try:
        delivered = start_report(client, holder, hook.url())
        tasks.run_job(delivered)
        job_callbacks.deliver_callback(delivered)
        queued = start_report(client, holder, hook.url())  # not finished: its callback is not due yet
        silent = start_report(client, holder)  # no callback URL
        tasks.run_job(silent)
        before = {job.pk: (job.callback_state, job.callback_attempts) for job in Job.objects.all()}
        with django_capture_on_commit_callbacks(execute=True) as sent:
            messages = resend(admin_client, delivered, queued, silent)
        assert messages == [
            "0 callback(s) queued to be sent again. 3 left as they were: only a finished job's failed callback is "
            "sent again."
        ]
        assert sent == []
        assert {job.pk: (job.callback_state, job.callback_attempts) for job in Job.objects.all()} == before
        assert len(hook.requests) == 1
    finally:
        hook.stop()


def test_staff_who_may_only_view_jobs_cannot_send_callbacks_again(client, django_capture_on_commit_callbacks):
    holder = Holder()
    job_id, hook = failed_callback(client, holder)
    try:
        viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
        viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
        client.force_login(viewer)
        page = client.get(JOBS)
        assert page.status_code == 200
        assert "resend_callbacks" not in page.content.decode()
        with django_capture_on_commit_callbacks(execute=True) as sent:
            client.post(JOBS, {"action": "resend_callbacks", "_selected_action": [job_id]})
        assert sent == []
        assert Job.objects.get(pk=job_id).callback_state == Job.Callback.FAILED

        viewer.user_permissions.add(Permission.objects.get(codename="change_job"))
        viewer = User.objects.get(pk=viewer.pk)  # permissions are cached on the instance
        client.force_login(viewer)
        assert "resend_callbacks" in client.get(JOBS).content.decode()
    finally:
        hook.stop()
