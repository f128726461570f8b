"""The human desk as agents and operators use it: an operator's answer saved after the request's deadline. The
helpers here serve the desk's other tests (tests/concierge/test_desk_*.py) too."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.admin.utils import quote
from django.utils import timezone

from agent_handshake.concierge.jobs import run
from agent_handshake.models import AgentClient, ApiKey, Job

CONVERSE = "/agent/converse"


def issue():
    client, _ = AgentClient.objects.get_or_create(name="Desk agent")
    return ApiKey.objects.issue(client, scopes=["*"])


def escalate(client, secret: str, message: str, **context) -> str:
    """An agent's escalation, accepted (its message to the broker not sent: the test runs the job itself)."""
    response = client.post(
        CONVERSE,
        {"capability": "escalate_to_human", "query": message, "context": context},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 202, response.json()
    return response.json()["session_id"]


def poll(client, secret: str, job_id: str) -> dict:
    response = client.get(f"{CONVERSE}/status/{job_id}", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200, response.json()
    return response.json()


def answer(admin_client, job_id: str, text: str):
    return admin_client.post(
        f"/admin/agent_handshake/deskrequest/{quote(job_id)}/change/", {"operator_answer": text}, follow=True
    )


@pytest.mark.django_db
def test_an_answer_saved_after_the_request_expired_is_refused_and_the_request_expires(
    client, admin_client, settings, django_capture_on_commit_callbacks, time_machine
):
    """DESK_TIMEOUT_SECONDS is the agent's deadline: an operator's answer saved after it, before a poll or the
    recovery task marked the request expired, completed it (the agent, told it expires, got an answer later)."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DESK_TIMEOUT_SECONDS": 1}
    _, secret = issue()
    job_id = escalate(client, secret, "Can someone call me back about a wholesale order?")
    with django_capture_on_commit_callbacks(execute=True):
        run(job_id)
    assert Job.objects.get(pk=job_id).status == Job.Status.WAITING
    # The deadline passes (the clock is moved on); nobody has polled, and the beat has not run.
    time_machine.move_to(timezone.now() + datetime.timedelta(seconds=1.2))

    page = answer(admin_client, job_id, "Yes, tomorrow at ten.")
    assert page.status_code == 200
    shown = page.content.decode()
    # The page the operator typed in offered the field; saved after the deadline, the form no longer has it.
    assert "This request is expired; it takes no answer." in shown
    assert "The answer was sent to the agent" not in shown
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.EXPIRED
    assert (job.result, job.operator_answer, job.answered_by) == (None, "", None)
    assert poll(client, secret, job_id)["status"] == "expired"


@pytest.mark.django_db
def test_a_request_past_its_deadline_offers_no_answer_field(
    client, admin_client, settings, django_capture_on_commit_callbacks, time_machine
):
    """Before a poll or the recovery task marks it expired, the page of a request past its deadline offered the
    answer field, to refuse what the operator typed on save."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DESK_TIMEOUT_SECONDS": 1}
    _, secret = issue()
    job_id = escalate(client, secret, "Can someone call me back about a wholesale order?")
    with django_capture_on_commit_callbacks(execute=True):
        run(job_id)
    url = f"/admin/agent_handshake/deskrequest/{quote(job_id)}/change/"
    assert 'name="operator_answer"' in admin_client.get(url).content.decode()  # in time: it takes an answer
    time_machine.move_to(timezone.now() + datetime.timedelta(seconds=1.2))  # the deadline passes
    assert 'name="operator_answer"' not in admin_client.get(url).content.decode()
    assert Job.objects.get(pk=job_id).status == Job.Status.WAITING  # looking changes nothing
