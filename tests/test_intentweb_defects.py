"""IntentWeb defects a review found, each with a test that failed before its fix: the callback of a job whose
interaction was deleted (retention)."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from agent_handshake.concierge.conversation import delete_expired_interactions
from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.jobs import complete_waiting, deliver_callback
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.conf import app_settings
from agent_handshake.models import Interaction, Job
from tests.test_intentweb import Agent, key

pytestmark = pytest.mark.django_db


def test_the_callback_of_a_job_whose_interaction_was_deleted_is_a_signed_envelope(client, demo_content, settings):
    """The interaction is deleted after INTENT_RETENTION_SECONDS without a message, while its job still waits for
    an operator; the job's callback then posted ``{"flow_type": "error", ...}`` with no protocol_version,
    interaction_id or attribution: no IntentWeb envelope. It posts the job's outcome as a signed envelope, with the
    job's id (what the agent got when the job was accepted) as external_id."""
    from tests.test_callbacks import Receiver

    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "BASE_URL": "http://testserver"}
    receiver = Receiver().start()
    try:
        agent = Agent(client, secret=key())
        hook = receiver.url("/intent-hook")
        _, reply = agent.send("intent_request", "Can a person help me with a custom order?", callback_url=hook)
        assert reply["status"] == "accepted", reply
        job = Job.objects.get(pk=reply["external_id"])
        run_job(job.pk)
        idle = timezone.now() - datetime.timedelta(seconds=app_settings.INTENT_RETENTION_SECONDS + 60)
        Interaction.objects.filter(interaction_id=agent.interaction_id).update(updated_at=idle)
        assert delete_expired_interactions()[0] == 1
        complete_waiting(job.pk, operator_outcome("Yes: write to wholesale@lanternkettle.example.", "Mira"))
        deliver_callback(job.pk)
        (request,) = receiver.requests
        posted = json.loads(request["body"])
        agent.check(posted)  # a valid envelope (the upstream schema), signed by the site as its manifest says
        assert posted["flow_type"] == "execution_result"
        assert posted["external_id"] == job.pk
        assert "wholesale@lanternkettle.example" in posted["message"]
        assert posted["collected_information"] == {}  # deleted with the interaction, not sent again
    finally:
        receiver.stop()
