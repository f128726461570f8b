"""A human-desk request whose capability is taken out of the registry while it waits (a deploy that no longer calls
``desk.register_escalation()``, or code that unregisters it) ends with a clear error: ``failed``, code
``unavailable``, at the next recovery sweep or when an operator answers it. Before, it stayed ``pending`` to the agent
until its deadline (a day by default), and an operator's answer was refused while the request went on waiting."""

from __future__ import annotations

import pytest

from agent_handshake.concierge import jobs, recovery
from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.invocation import ActionFailed
from agent_handshake.models import Job
from tests.concierge.test_desk_deadline import answer, escalate, issue, poll

pytestmark = pytest.mark.django_db


def waiting(client, secret: str, message: str) -> str:
    job_id = escalate(client, secret, message)
    jobs.run(job_id)
    assert Job.objects.get(pk=job_id).status == Job.Status.WAITING
    return job_id


def test_a_waiting_request_whose_capability_was_removed_fails_at_the_next_sweep(client, registries):
    _, secret = issue()
    job_id = waiting(client, secret, "Can you blend 2 kg of a smoky tea?")
    assert recovery.recover()["requeued"] == 0
    assert Job.objects.get(pk=job_id).status == Job.Status.WAITING  # still offered: left as it is
    registries[1].unregister("escalate_to_human")
    recovery.recover()
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.FAILED, (job.status, job.progress)
    assert job.error["code"] == "unavailable"
    assert "escalate_to_human" in job.error["message"]
    assert job.finished_at is not None
    body = poll(client, secret, job_id)
    assert body["status"] == "failed", body
    assert body["error"]["code"] == "unavailable", body


def test_an_operators_answer_to_a_request_whose_capability_was_removed_ends_it(client, admin_client, registries):
    _, secret = issue()
    job_id = waiting(client, secret, "A custom order, please.")
    registries[1].unregister("escalate_to_human")
    with pytest.raises(ActionFailed, match="no longer offered"):
        jobs.complete_waiting(job_id, operator_outcome("Yes, we can.", "Ada"))
    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.FAILED
    assert job.error["code"] == "unavailable"
    assert poll(client, secret, job_id)["status"] == "failed"


def test_an_operators_answer_in_the_admin_to_a_removed_capabilitys_request(client, admin_client, registries):
    _, secret = issue()
    job_id = waiting(client, secret, "Another custom order.")
    registries[1].unregister("escalate_to_human")
    page = answer(admin_client, job_id, "Yes.")
    assert page.status_code == 200
    assert Job.objects.get(pk=job_id).status == Job.Status.FAILED
    assert poll(client, secret, job_id)["error"]["code"] == "unavailable"
