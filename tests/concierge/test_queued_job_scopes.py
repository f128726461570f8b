"""A queued job is run only for a key that still has its capability's scope."""

from __future__ import annotations

import pytest

from agent_handshake.concierge.jobs import run
from agent_handshake.models import AgentClient, ApiKey, Job
from tests.concierge.test_desk_deadline import CONVERSE, poll


@pytest.mark.django_db
def test_a_queued_job_whose_key_lost_the_capabilitys_scope_is_not_run(client, django_capture_on_commit_callbacks):
    """The scope was checked when the job was accepted only: a key whose operator took the scope away (or a deploy
    that put the capability under a scope the key lacks) still had its queued jobs run, and their writes kept."""
    from tests.testapp.models import Report

    client_, _ = AgentClient.objects.get_or_create(name="Report agent")
    key, secret = ApiKey.objects.issue(client_, scopes=["reports"])
    response = client.post(
        CONVERSE,
        {"capability": "compile_report", "query": "Report", "context": {"input": {"topic": "white tea"}}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 202, response.json()
    job_id = response.json()["session_id"]
    ApiKey.objects.filter(pk=key.pk).update(scopes=["orders"])  # an operator's edit, while the job is queued

    run(job_id)
    assert not Report.objects.filter(job_id=job_id).exists()
    polled = poll(client, secret, job_id)
    assert polled["status"] == "failed"
    assert polled["error"]["code"] == "forbidden"
    assert "reports" in polled["error"]["message"]


@pytest.mark.django_db
def test_a_verified_agents_queued_job_is_judged_by_the_scopes_it_has_when_it_runs(client):
    """A verified agent's key holds no scopes of its own: its trust tier's and its extra ones count, then as now."""
    from agent_handshake.models import VerifiedAgent
    from tests.concierge.test_blocked_agent_jobs import did_agent, start_report

    agent = did_agent(client)  # its extra scope: reports
    kept, lost = start_report(client, agent), start_report(client, agent, topic="oolong")
    assert run(kept) == Job.Status.SUCCESS
    VerifiedAgent.objects.filter(did=agent.did).update(scopes=[])  # an operator takes the extra scope away
    assert run(lost) == Job.Status.FAILED
    assert Job.objects.get(pk=lost).error["code"] == "forbidden"
