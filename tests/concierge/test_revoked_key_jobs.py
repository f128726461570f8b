"""An API key an operator has revoked, or whose agent client was made inactive, stops acting for its holder in the work
it queued before, as a blocked DID does (``tests/concierge/test_blocked_agent_jobs.py``): a job it queued is not run (it
ends ``cancelled``, code ``key_revoked`` or ``client_inactive``), and no callback is sent for it (the delivery is given
up, with the reason recorded). A job already running finishes; only its callback is withheld. Taking the key or the
client back into use brings neither back.

A key that merely expired is no revocation: a job accepted while the key was valid runs, and its callback (signed
with the key's secret, which the agent still holds) is sent. A blocked DID's job keeps the code ``agent_blocked``
whatever else is true of its key.

A real gunicorn and Celery worker see the revocation and the deactivation in
``tests/concierge/test_refused_owner_jobs.py``.
"""

from __future__ import annotations

import datetime
import json
import threading

import pytest
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_handshake import tasks
from agent_handshake.concierge import callbacks, job_callbacks
from agent_handshake.models import AgentClient, ApiKey, Job
from tests.concierge.test_blocked_agent_jobs import (
    assert_a_retried_callback_is_given_up,
    assert_run_and_called_back,
    assert_stays_cancelled,
    block,
    did_agent,
    start_report,
    withheld_callback,
)
from tests.concierge.test_callbacks import Receiver
from tests.identity.test_verified_agents import shown_form
from tests.testapp.models import Report

pytestmark = pytest.mark.django_db

REVOKED, INACTIVE = "key_revoked", "client_inactive"


class Holder:
    """An agent holding an API key issued on the admin's API key page (its client one of its own): it starts jobs
    through ``start_report`` as a DID agent does, with its key as a bearer token."""

    def __init__(self, name: str = "Crawler Co") -> None:
        client, _ = AgentClient.objects.get_or_create(name=name)
        self.key, self.secret = ApiKey.objects.issue(client, scopes=["reports"])

    @property
    def headers(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.secret}"}


def revoke(how: str, key: ApiKey, admin_client=None) -> None:
    """Revoke the key as an operator would: the API key list's "Revoke" action, or in code."""
    if how == "admin":
        response = admin_client.post(
            "/admin/agent_handshake/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
        )
        assert response.status_code == 302, response.content.decode()[:3000]
    else:
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None


def deactivate(how: str, key: ApiKey, admin_client=None) -> None:
    """Make the key's client inactive as an operator would: its admin change page, "active" unticked, or in code."""
    client = key.client
    if how == "admin":
        url = f"/admin/agent_handshake/agentclient/{client.pk}/change/"
        form = shown_form(admin_client.get(url).content.decode())
        form.pop("is_active")
        response = admin_client.post(url, form)
        assert response.status_code == 302, response.content.decode()[:3000]
    else:
        AgentClient.objects.filter(pk=client.pk).update(is_active=False)
    assert not AgentClient.objects.get(pk=client.pk).is_active


def refuse(what: str, how: str, key: ApiKey, admin_client=None) -> str:
    """Revoke the key or deactivate its client; the code its jobs then end with."""
    if what == "revoke":
        revoke(how, key, admin_client)
        return REVOKED
    deactivate(how, key, admin_client)
    return INACTIVE


def restore(key: ApiKey) -> None:
    """The operator takes the key and its client back into use."""
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=None)
    AgentClient.objects.filter(pk=key.client_id).update(is_active=True)


def assert_given_up(job: Job, code: str, attempts: int = 0) -> None:
    """The callback was not sent, for the reason ``code`` names, and will not be tried again."""
    assert job.callback_state == Job.Callback.FAILED
    assert job.callback_last_error.startswith("Not sent: ")
    assert ("revoked" if code == REVOKED else "inactive") in job.callback_last_error
    assert job.callback_next_attempt_at is None
    assert job.callback_attempts == attempts  # no attempt was made for the refusal


REFUSALS = [("revoke", "admin"), ("revoke", "update"), ("deactivate", "admin"), ("deactivate", "update")]


@pytest.mark.parametrize(("what", "how"), REFUSALS)
def test_a_queued_job_of_a_revoked_key_is_not_run_and_no_callback_is_sent(client, admin_client, what, how):
    holder = Holder()
    hook = Receiver().start()
    try:
        job_id = start_report(client, holder, hook.url())
        code = refuse(what, how, holder.key, admin_client)

        assert tasks.run_job(job_id) == "skipped"  # the worker's task, run here: it ran nothing
        job = Job.objects.get(pk=job_id)
        assert job.status == Job.Status.CANCELLED
        assert job.error["code"] == code
        assert job.error["message"].startswith("The job was not run: ")
        assert ("revoked" if code == REVOKED else "inactive") in job.error["message"]
        assert job.attempts == 0  # it never ran
        assert not Report.objects.filter(job_id=job_id).exists()
        assert_given_up(job, code)

        # A callback message that arrives anyway (a recovery, a duplicate) sends nothing.
        assert job_callbacks.deliver_callback(job_id) is None
        assert hook.requests == []

        # The holder's own poll is refused as every request with the key is; the operator sees why the job ended.
        assert client.get(f"/agent/converse/status/{job_id}", **holder.headers).status_code == 401
        page = admin_client.get(f"/admin/agent_handshake/job/{quote(job_id)}/change/").content.decode()
        assert code in page

        # Taking the key back into use brings back neither the job nor its callback.
        restore(holder.key)
        assert_stays_cancelled(client, job, code, holder.headers, hook)
    finally:
        hook.stop()


def test_a_job_retried_after_an_error_is_not_run_again_once_its_key_is_revoked(client):
    """A job that crashed and waits for its next attempt has not finished: it is claimed afresh, and refused."""
    holder = Holder()
    job_id = start_report(client, holder)
    Job.objects.filter(pk=job_id).update(attempts=1, progress="Retrying after an error")  # as jobs._crashed leaves it
    revoke("update", holder.key)
    assert tasks.run_job(job_id) == "skipped"
    job = Job.objects.get(pk=job_id)
    assert (job.attempts, job.error["code"], job.callback_state) == (1, REVOKED, "")  # no callback was asked for


@pytest.mark.parametrize("what", ["revoke", "deactivate"])
def test_a_finished_jobs_callback_is_not_sent_once_its_key_is_revoked(client, what):
    holder = Holder()
    job, code = withheld_callback(client, holder, lambda: refuse(what, "update", holder.key))
    assert job.error is None or job.error == {}
    assert_given_up(job, code)


def test_a_callback_being_retried_is_given_up_once_its_key_is_revoked(client, admin_client):
    holder = Holder()
    assert_a_retried_callback_is_given_up(
        client,
        holder,
        withdraw=lambda: revoke("admin", holder.key, admin_client),
        given_up=lambda job: assert_given_up(job, REVOKED, attempts=1),
        restore=lambda: restore(holder.key),
    )


def test_a_key_that_expired_after_the_job_was_accepted_still_has_it_run_and_called_back(client):
    """An expiry is the key's planned end for new requests, not an operator's judgement of its holder: a job the
    site accepted while the key was valid is done, and its result delivered, signed with the key's secret (which
    the agent still holds and verifies), however long the job waited in the queue. The callback is then the agent's
    only way to the result: its polls with the expired key are refused like any other request."""
    holder = Holder()
    hook = Receiver().start()
    try:
        job_id = start_report(client, holder, hook.url())
        ApiKey.objects.filter(pk=holder.key.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
        assert client.get(f"/agent/converse/status/{job_id}", **holder.headers).status_code == 401
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        assert Report.objects.filter(job_id=job_id).count() == 1
        assert job_callbacks.deliver_callback(job_id) is None  # delivered: nothing to retry
        assert len(hook.requests) == 1
        delivered = hook.requests[0]
        assert delivered["headers"]["X-AHP-Key-Id"] == holder.key.key_id
        assert callbacks.verify(holder.secret, delivered["body"], delivered["headers"][callbacks.SIGNATURE_HEADER])
        assert json.loads(delivered["body"])["status"] == "success"
        assert Job.objects.get(pk=job_id).callback_state == Job.Callback.DELIVERED
    finally:
        hook.stop()


def test_a_blocked_agents_job_keeps_its_code_whatever_else_is_true_of_its_key(client, admin_client):
    """The block is the agent's own refusal and is named first: a blocked DID whose key was also revoked and whose
    client was made inactive has its job end ``agent_blocked``, its callback withheld for the block."""
    agent = did_agent(client)
    hook = Receiver().start()
    try:
        job_id = start_report(client, agent, hook.url())
        key = ApiKey.objects.get(verified_agent__did=agent.did)
        revoke("admin", key, admin_client)
        deactivate("update", key)
        block("update", agent)
        assert tasks.run_job(job_id) == "skipped"
        job = Job.objects.get(pk=job_id)
        assert (job.status, job.error["code"]) == (Job.Status.CANCELLED, "agent_blocked")
        assert "blocked" in job.callback_last_error
        assert hook.requests == []
    finally:
        hook.stop()


def test_a_verified_agents_revoked_key_stops_its_jobs_too(client, admin_client):
    """A DID's key is an API key like any other: revoked on the API key page (unblocked), its jobs stop for the
    revocation."""
    agent = did_agent(client)
    job_id = start_report(client, agent)
    revoke("admin", ApiKey.objects.get(verified_agent__did=agent.did), admin_client)
    assert tasks.run_job(job_id) == "skipped"
    assert Job.objects.get(pk=job_id).error["code"] == REVOKED


def test_other_keys_of_the_client_and_other_clients_are_not_touched(client):
    """The check is about the job's own key and its own client: another key's revocation, or another client's
    deactivation, changes nothing."""
    holder, sibling, stranger = Holder(), Holder(), Holder("Other Co")
    assert sibling.key.client_id == holder.key.client_id != stranger.key.client_id

    def meanwhile() -> None:
        revoke("update", sibling.key)
        deactivate("update", stranger.key)

    assert_run_and_called_back(client, holder, meanwhile)


def test_the_refusal_is_read_in_the_statement_that_locks_the_job(client):
    """No extra round trip: the key's and its client's state are read by the worker's locking ``SELECT ... FOR
    UPDATE`` of the job itself, not by a query of their own."""
    holder = Holder()
    hook = Receiver().start()
    tables = (ApiKey._meta.db_table, AgentClient._meta.db_table)
    try:
        queued = start_report(client, holder, hook.url())
        finished = start_report(client, holder, hook.url())
        assert tasks.run_job(finished) == Job.Status.SUCCESS
        revoke("update", holder.key)
        for act in (lambda: tasks.run_job(queued), lambda: job_callbacks.deliver_callback(finished)):
            with CaptureQueriesContext(connection) as captured:
                act()
            reading = [query["sql"] for query in captured if any(table in query["sql"] for table in tables)]
            assert len(reading) == 1, reading
            assert "FOR UPDATE" in reading[0]
        assert Job.objects.get(pk=queued).error["code"] == REVOKED
        assert Job.objects.get(pk=finished).callback_last_error.startswith("Not sent: ")
        assert hook.requests == []
    finally:
        hook.stop()


@pytest.mark.django_db(transaction=True)
def test_a_lock_on_the_key_or_its_client_keeps_no_worker_off_its_jobs():
    """The key and its client are read, not locked, with the job: a transaction that holds their rows (a request
    recording the key's use, an operator saving the client) does not make a worker skip the key's jobs as if another
    worker had them (``SKIP LOCKED``), nor wait for it."""
    holder = Holder()
    hook = Receiver().start()
    job = Job.objects.create(capability="compile_report", api_key=holder.key, input={"topic": "kabusecha"})
    done = Job.objects.create(
        capability="compile_report",
        api_key=holder.key,
        status=Job.Status.SUCCESS,
        result={"data": {"topic": "hojicha", "words": 1, "worker_pid": 1}, "answer": "", "side_effects": []},
        callback_url=hook.url(),
        callback_state=Job.Callback.PENDING,
    )
    holding, release = threading.Event(), threading.Event()

    def hold_the_rows():
        try:
            with transaction.atomic():
                ApiKey.objects.filter(pk=holder.key.pk).update(last_used_at=timezone.now())
                AgentClient.objects.select_for_update().get(pk=holder.key.client_id)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_the_rows)
    thread.start()
    try:
        assert holding.wait(30)
        assert tasks.run_job(job.pk) == Job.Status.SUCCESS
        assert job_callbacks.deliver_callback(done.pk) is None
        assert Job.objects.get(pk=done.pk).callback_state == Job.Callback.DELIVERED
        assert len(hook.requests) == 1
    finally:
        release.set()
        thread.join(30)
        hook.stop()


def test_a_finished_jobs_callback_whose_key_was_deleted_says_so(client):
    """The callback is signed with the key that started the job: with that key deleted (its client deleted with
    it), it cannot be sent, and the reason recorded said SECRET_KEY had changed and to re-issue the key."""
    holder = Holder()
    hook = Receiver().start()
    try:
        job_id = start_report(client, holder, hook.url())
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        holder.key.client.delete()
        assert job_callbacks.deliver_callback(job_id) is None
        assert hook.requests == []
        job = Job.objects.get(pk=job_id)
        assert job.api_key is None
        assert job.callback_state == Job.Callback.FAILED
        assert "deleted" in job.callback_last_error
        assert "SECRET_KEY" not in job.callback_last_error
    finally:
        hook.stop()
