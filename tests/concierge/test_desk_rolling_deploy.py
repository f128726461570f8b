"""During a rolling deploy, processes of two releases run side by side. A release that adds a desk capability (a second
``register_escalation(name=...)``) puts requests on the desk from its new processes while a process of the release
before, started earlier and without that capability, still runs the recovery sweep and serves the admin. That older
process withdrew the new requests as "no longer offered" at its next sweep (every 15 seconds on the demo's beat), and
an operator's answer served by it failed the request, though the site offers the capability. A process now judges
only the requests put on the desk before its registry took its present shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from agent_handshake.concierge import desk, jobs
from agent_handshake.models import Job
from tests.concierge.test_desk_deadline import issue, poll

ROOT = Path(__file__).resolve().parents[2]
CONVERSE = "/agent/converse"

#: A process of the release before: started (its registry shaped at start-up) before the request reached the desk.
OLDER_PROCESS = """
import json, sys
import django
django.setup()
from agent_handshake.concierge import jobs, recovery
from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.invocation import ActionFailed
from agent_handshake.registry import capability_registry
print(json.dumps({"knows": capability_registry.get("talk_to_sales") is not None}), flush=True)
job_id = sys.stdin.readline().strip()
swept = recovery.recover()
try:
    jobs.complete_waiting(job_id, operator_outcome("We can ship on Monday.", "Ada"))
    answer = "taken"
except ActionFailed as exc:
    answer = exc.message
print(json.dumps({"withdrawn": swept["withdrawn"], "answer": answer}), flush=True)
"""


@pytest.fixture
def older_process():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],  # the test database
    }
    process = subprocess.Popen(
        [sys.executable, "-c", OLDER_PROCESS], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        started = json.loads(process.stdout.readline() or "null")
        assert started == {"knows": False}, process.stderr.read()
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_an_older_process_neither_withdraws_nor_fails_a_request_of_a_capability_a_newer_release_offers(
    client, registries, older_process
):
    desk.register_escalation(name="talk_to_sales")  # this process: the new release
    _, secret = issue()
    response = client.post(
        CONVERSE,
        {"capability": "talk_to_sales", "query": "Can you ship 40 kg of sencha to Lyon?"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 202, response.json()
    job_id = response.json()["session_id"]
    assert jobs.run(job_id) == Job.Status.WAITING

    output, errors = older_process.communicate(job_id + "\n", timeout=120)
    assert older_process.returncode == 0, errors
    result = json.loads(output.strip().splitlines()[-1])

    job = Job.objects.get(pk=job_id)
    assert job.status == Job.Status.WAITING, (job.status, job.error)
    assert result["withdrawn"] == 0
    assert result["answer"] != "taken"  # refused there, and the request still waits for an answer here
    assert poll(client, secret, job_id)["status"] == "pending"
    jobs.complete_waiting(job_id, desk.operator_outcome("We can ship on Monday.", "Ada"))  # the new release's
    assert poll(client, secret, job_id)["status"] == "success"
