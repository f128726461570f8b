"""A blocked verified agent's async work stops acting on its behalf: a job it queued before the block is not run
(it ends ``cancelled`` with the code ``agent_blocked``), and no callback is sent to the URL it gave (the delivery
is given up, with the reason recorded). A job already running finishes; only its callback is withheld. Unblocking
the DID brings neither back. The block counts however it was set: in the admin or in code.

The DID agents here complete the real handshake (``tests/identity/test_verified_agents.py``). A real gunicorn and Celery
worker see the block in ``tests/concierge/test_refused_owner_jobs.py``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.test import override_settings
from django.utils import timezone

from agent_handshake import tasks
from agent_handshake.concierge import job_callbacks, recovery
from agent_handshake.identity import trust
from agent_handshake.models import Job, VerifiedAgent
from tests.concierge.test_callbacks import Receiver
from tests.identity.test_verified_agents import Agent, shown_form
from tests.testapp.models import Report

pytestmark = pytest.mark.django_db

BLOCKED_CODE = "agent_blocked"
T = TypeVar("T")


def did_agent(client) -> Agent:
    """A verified agent (a real handshake) that may start the test app's ``compile_report`` jobs."""
    agent = Agent(client)
    agent.handshake()
    VerifiedAgent.objects.filter(did=agent.did).update(scopes=["reports"])  # an operator's extra scope
    return agent


def start_report(client, agent: Agent, callback_url: str = "", **input) -> str:
    context = {"input": {"topic": "first flush darjeeling", **input}, "accept_types": ["application/action-result"]}
    if callback_url:
        context["callback_url"] = callback_url
    body = {"ahp": "0.1", "capability": "compile_report", "query": "Report", "context": context}
    response = client.post("/agent/converse", json.dumps(body), content_type="application/json", **agent.headers)
    assert response.status_code == 202, response.json()
    return response.json()["session_id"]


def block(how: str, agent: Agent, admin_client=None) -> None:
    """Block the agent's DID as an operator would: on its admin change page, or in code."""
    verified = VerifiedAgent.objects.get(did=agent.did)
    if how == "admin":
        url = f"/admin/agent_handshake/verifiedagent/{verified.pk}/change/"
        form = shown_form(admin_client.get(url).content.decode())
        response = admin_client.post(url, {**form, "blocked": "on"})
        assert response.status_code == 302, response.content.decode()[:3000]
    elif how == "save":
        verified.blocked = True
        verified.save()
    else:
        VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=True)
    assert VerifiedAgent.objects.get(pk=verified.pk).blocked


def unblock(agent: Agent) -> None:
    VerifiedAgent.objects.filter(did=agent.did).update(blocked=False)


def assert_given_up_for_the_block(job: Job, attempts: int = 0) -> None:
    """The callback was not sent for the block, and will not be tried again."""
    assert job.callback_state == Job.Callback.FAILED
    assert "blocked" in job.callback_last_error
    assert job.callback_next_attempt_at is None
    assert job.callback_attempts == attempts  # no attempt was made for the block


@pytest.mark.parametrize("how", ["admin", "save", "update"])
def test_a_queued_job_of_a_blocked_agent_is_not_run_and_no_callback_is_sent(client, admin_client, how):
    agent = did_agent(client)
    hook = Receiver().start()
    try:
        job_id = start_report(client, agent, hook.url())
        block(how, agent, admin_client)

        assert tasks.run_job(job_id) == "skipped"  # the worker's task, run here: it ran nothing
        job = Job.objects.get(pk=job_id)
        assert job.status == Job.Status.CANCELLED
        assert job.error["code"] == BLOCKED_CODE
        assert "blocked" in job.error["message"]
        assert job.attempts == 0  # it never ran
        assert not Report.objects.filter(job_id=job_id).exists()
        assert_given_up_for_the_block(job)

        # A callback message that arrives anyway (a recovery, a duplicate) sends nothing.
        assert job_callbacks.deliver_callback(job_id) is None
        assert hook.requests == []

        # The agent's own poll gets the 403 every request of a blocked DID gets; the operator sees why.
        polled = client.get(f"/agent/converse/status/{job_id}", **agent.headers)
        assert (polled.status_code, polled.json()["code"]) == (403, "blocked")
        page = admin_client.get(f"/admin/agent_handshake/job/{quote(job_id)}/change/").content.decode()
        assert BLOCKED_CODE in page

        # Unblocking brings back neither the job nor its callback.
        unblock(agent)
        assert_stays_cancelled(client, job, BLOCKED_CODE, agent.headers, hook)
    finally:
        hook.stop()


def assert_stays_cancelled(client, job: Job, code: str, headers: dict, hook: Receiver) -> None:
    """Once its owner is taken back into use, a cancelled job is neither run nor called back by a recovery or a
    message that arrives anyway, and its owner's poll reads it as failed, with the refusal's code."""
    recovery.recover(timezone.now() + datetime.timedelta(hours=1), recovery_seconds=0)
    assert tasks.run_job(job.pk) == "skipped"
    assert job_callbacks.deliver_callback(job.pk) is None
    job.refresh_from_db()
    assert (job.status, job.error["code"], job.callback_state) == ("cancelled", code, "failed")
    polled = client.get(f"/agent/converse/status/{job.pk}", **headers)
    assert polled.status_code == 200
    assert (polled.json()["status"], polled.json()["error"]["code"]) == ("failed", code)
    assert hook.requests == []


def test_a_job_retried_after_an_error_is_not_run_again_once_its_agent_is_blocked(client):
    """A job that crashed and waits for its next attempt has not finished: it is claimed afresh, and refused."""
    agent = did_agent(client)
    job_id = start_report(client, agent)
    Job.objects.filter(pk=job_id).update(attempts=1, progress="Retrying after an error")  # as jobs._crashed leaves it
    block("update", agent)
    assert tasks.run_job(job_id) == "skipped"
    job = Job.objects.get(pk=job_id)
    assert (job.attempts, job.error["code"], job.callback_state) == (1, BLOCKED_CODE, "")  # no callback was asked for


def withheld_callback(client, owner, withdraw: Callable[[], T]) -> tuple[Job, T]:
    """A job of ``owner`` (an ``Agent`` or a ``Holder``) finished, its callback pending, when ``withdraw`` took the
    owner's standing: the callback is not sent (nor left to retry), and the work stands. The job, and what
    ``withdraw`` returned, for the test to check how the job says why."""
    hook = Receiver().start()
    try:
        job_id = start_report(client, owner, hook.url())
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        assert Job.objects.get(pk=job_id).callback_state == Job.Callback.PENDING
        withdrawn = withdraw()
        assert job_callbacks.deliver_callback(job_id) is None  # nothing to retry
        assert hook.requests == []
    finally:
        hook.stop()
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.SUCCESS  # the work stands; only its delivery is withheld
    return job, withdrawn


def test_a_finished_jobs_callback_is_not_sent_once_its_agent_is_blocked(client):
    agent = did_agent(client)
    job, _ = withheld_callback(client, agent, lambda: block("save", agent))
    assert_given_up_for_the_block(job)


def assert_a_retried_callback_is_given_up(client, owner, *, withdraw, given_up, restore) -> None:
    """A job of ``owner`` finished, and its callback refused with a 503 (to be tried again): the callback is given
    up at its next attempt once ``withdraw`` took the owner's standing (``given_up`` checks how the job says so),
    sending nothing; and stays given up once ``restore`` gave the standing back: recovery re-sends only pending
    callbacks."""
    hook = Receiver(status=503).start()
    try:
        job_id = start_report(client, owner, hook.url())
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        assert job_callbacks.deliver_callback(job_id) is not None  # refused with a 503: to be tried again
        assert len(hook.requests) == 1
        withdraw()
        hook.status = 200
        assert job_callbacks.deliver_callback(job_id) is None
        assert len(hook.requests) == 1
        job = Job.objects.get(pk=job_id)
        given_up(job)
        assert job.callback_last_status == 503  # the last answer an attempt got; the withholding sent nothing
        restore()
        counts = recovery.recover(timezone.now() + datetime.timedelta(hours=1), recovery_seconds=0)
        assert counts["callbacks_requeued"] == 0
        assert job_callbacks.deliver_callback(job_id) is None
        assert len(hook.requests) == 1
    finally:
        hook.stop()


def test_a_callback_being_retried_is_given_up_once_its_agent_is_blocked(client):
    agent = did_agent(client)
    assert_a_retried_callback_is_given_up(
        client,
        agent,
        withdraw=lambda: block("update", agent),
        given_up=lambda job: assert_given_up_for_the_block(job, attempts=1),
        restore=lambda: unblock(agent),
    )


def assert_run_and_called_back(client, owner, meanwhile: Callable[[], object]) -> None:
    """A job of ``owner`` queued, then ``meanwhile`` refused others: the job runs, and its callback is delivered."""
    hook = Receiver().start()
    try:
        job_id = start_report(client, owner, hook.url())
        meanwhile()
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        assert job_callbacks.deliver_callback(job_id) is None
        assert len(hook.requests) == 1
        assert Job.objects.get(pk=job_id).callback_state == Job.Callback.DELIVERED
    finally:
        hook.stop()


def test_jobs_of_other_keys_and_of_unblocked_agents_run_and_call_back(client):
    """The check is about the job's own key: another agent's block, or none, changes nothing."""
    agent, other = did_agent(client), did_agent(client)
    assert_run_and_called_back(client, agent, lambda: block("update", other))


def test_trust_falling_to_the_lowest_tier_is_no_block(client, settings):
    """Trust tiers set rate limits and scopes, never a block (``DID_TRUST_TIERS`` has no such setting): only an
    operator's block stops an agent's queued work. An agent whose trust fell to nothing still has its job run."""
    tiers = [{"name": "trusted", "min_trust": 0.6, "rate_limits": "authenticated", "scopes": []}]
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "DID_TRUST_TIERS": tiers}):
        agent = did_agent(client)
        job_id = start_report(client, agent)
        verified = VerifiedAgent.objects.get(did=agent.did)
        trust.set_by_operator(verified, 0.0, "ops@example.com")
        assert trust.tier_of(verified.trust).name == "untrusted"
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
