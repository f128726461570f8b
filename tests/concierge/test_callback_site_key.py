"""An IntentWeb job's callback while the site key does not load (``SITE_PRIVATE_KEY`` broken): its body is an
envelope the site signs, so it cannot be formed. It is not sent and nothing is lost: the attempt is counted, the
job says why (``callback_last_error``, where an operator reads it) and the callback is tried again on the schedule of
an unreachable receiver, so once the key is fixed the agent gets its callback, once, signed."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from agent_handshake.concierge.callbacks import verify
from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.job_callbacks import deliver_callback
from agent_handshake.concierge.jobs import complete_waiting
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.models import AgentClient, ApiKey, Job
from tests.concierge.test_callbacks import Receiver
from tests.intentweb.test_intentweb import Agent

pytestmark = pytest.mark.django_db


def test_a_callback_waits_for_the_site_key_and_is_sent_once_it_loads(client, demo_content, settings):
    working = dict(settings.AGENT_HANDSHAKE)
    agent_client, _ = AgentClient.objects.get_or_create(name="IntentWeb agent")
    _, secret = ApiKey.objects.issue(agent_client, scopes=["*"])
    receiver = Receiver().start()
    try:
        agent = Agent(client, secret=secret)
        hook = receiver.url("/intent-hook")
        _, reply = agent.send("intent_request", "Can a person help me with a custom order?", callback_url=hook)
        assert reply["status"] == "accepted", reply
        job = Job.objects.get(pk=reply["external_id"])
        run_job(job.pk)
        complete_waiting(job.pk, operator_outcome("Yes: write to wholesale@lanternkettle.example.", "Mira"))
        assert Job.objects.get(pk=job.pk).callback_state == Job.Callback.PENDING

        # The key breaks: the attempt sends nothing, says why, and asks to be tried again (what the task schedules).
        settings.AGENT_HANDSHAKE = {**working, "SITE_PRIVATE_KEY": "garbage"}
        before = timezone.now()
        countdown = deliver_callback(job.pk)
        assert countdown is not None
        assert countdown > 0
        job.refresh_from_db()
        assert job.callback_state == Job.Callback.PENDING
        assert job.callback_attempts == 1
        assert job.callback_last_status is None
        assert job.callback_last_error.startswith("the site key is unavailable: "), job.callback_last_error
        assert "SITE_PRIVATE_KEY" in job.callback_last_error  # what to fix...
        assert "garbage" not in job.callback_last_error  # ...without quoting the secret
        assert job.callback_next_attempt_at > before
        assert job.callback_delivered_at is None
        assert receiver.requests == []

        # Still broken: a second attempt on the schedule, counted the same way.
        assert deliver_callback(job.pk) is not None
        job.refresh_from_db()
        assert (job.callback_state, job.callback_attempts) == (Job.Callback.PENDING, 2)
        assert receiver.requests == []

        # The key fixed: the next attempt delivers the signed envelope, once.
        settings.AGENT_HANDSHAKE = working
        assert deliver_callback(job.pk) is None
        job.refresh_from_db()
        assert job.callback_state == Job.Callback.DELIVERED
        assert (job.callback_attempts, job.callback_last_status, job.callback_last_error) == (3, 200, "")
        assert job.callback_delivered_at is not None
        assert job.callback_next_attempt_at is None
        assert deliver_callback(job.pk) is None  # nothing left to send
        (request,) = receiver.requests
        assert verify(secret, request["body"], request["headers"]["X-AHP-Signature"])
        assert request["headers"]["X-AHP-Session-Id"] == job.pk
        posted = json.loads(request["body"])
        agent.check(posted)  # a valid envelope, signed with the site key
        assert posted["flow_type"] == "execution_result"
        assert posted["interaction_id"] == agent.interaction_id
        assert "wholesale@lanternkettle.example" in posted["message"]
    finally:
        receiver.stop()
