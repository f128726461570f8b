"""How MCP's ``job_status``, NLWeb's ``/await`` and a schema templates callback render a job that ended without a
result: cancelled (its stored error says so) or expired (it has none, and each front door falls back on the job's
status and progress). tests/concierge/test_job_input_refusals.py covers a refusal's details."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from agent_handshake.concierge import jobs
from agent_handshake.models import AgentClient, ApiKey, Job
from agent_handshake.schema_templates.views import callback_body

pytestmark = pytest.mark.django_db

EXPIRED = "No one answered in time; the request expired."
CANCELLED = "The job was cancelled at the caller's request."


@pytest.fixture
def key():
    agent, _ = AgentClient.objects.get_or_create(name="Job watcher")
    return ApiKey.objects.issue(agent, scopes=["*"])


def ended(api_key, how):
    """A job of ``api_key`` that ended ``how``: cancelled before it ran, or expired waiting for an operator."""
    if how == "cancelled":
        job = Job.objects.create(capability="compile_report", api_key=api_key, input={"topic": "tea"})
        return jobs.cancel(job.pk)
    past = timezone.now() - datetime.timedelta(minutes=1)
    job = Job.objects.create(capability="compile_report", api_key=api_key, status="waiting", expires_at=past)
    jobs.expire(pk=job.pk)
    job.refresh_from_db()
    return job


def job_status(client, secret, job):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "job_status", "arguments": {"job_id": job.pk}}}  # fmt: skip
    response = client.post("/mcp", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_MCP_PROTOCOL_VERSION="2025-06-18")  # fmt: skip
    return response.json()["result"]


def await_job(client, secret, job):
    response = client.post("/await", json.dumps({"promise_token": job.pk, "action": "checkin"}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")  # fmt: skip
    return response.json()["error"]


@pytest.mark.parametrize(("how", "message"), [("cancelled", CANCELLED), ("expired", EXPIRED)])
def test_a_job_ended_without_a_result_in_each_front_door(client, key, how, message):
    api_key, secret = key
    job = ended(api_key, how)
    assert job.status == how
    assert (job.error is None) == (how == "expired")

    result = job_status(client, secret, job)
    assert result["structuredContent"]["error"] == {"code": how, "message": "" if how == "expired" else message}
    assert result["content"][0]["text"] == f"Job {job.pk} ended {how}: {message}."

    assert await_job(client, secret, job) == {"code": how.upper(), "message": message, "details": {"reason": how}}

    body = callback_body(job)
    if how == "expired":
        assert "error" not in body
    else:
        assert body["error"] == {"code": "cancelled", "message": CANCELLED}


def test_a_failed_job_whose_stored_error_has_no_message(client, key):
    """An error stored with its code alone (a row failed by hand, or by an older release) still renders in AHP's
    status poll: its code kept, the front door's own words for the message, where a lookup of "message" answered
    500."""
    api_key, secret = key
    job = Job.objects.create(capability="compile_report", api_key=api_key, status="failed", error={"code": "sold_out"})
    response = client.get(f"/agent/converse/status/{job.pk}", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["error"] == {"code": "sold_out", "message": "The job failed."}
    assert body["progress"] == "The job failed."
