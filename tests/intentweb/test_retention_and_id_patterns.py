"""IntentWeb at its edges: the callback of a job whose interaction was deleted (retention) is still a signed envelope,
and an id with a trailing newline does not pass the ``^...$`` patterns."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

from agent_handshake.concierge.conversation import delete_expired_interactions
from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.job_callbacks import deliver_callback
from agent_handshake.concierge.jobs import complete_waiting
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.conf import app_settings
from agent_handshake.models import Interaction, Job
from tests.intentweb.test_intentweb import Agent, key

pytestmark = pytest.mark.django_db


def test_the_callback_of_a_job_whose_interaction_was_deleted_is_a_signed_envelope(client, demo_content, settings):
    """The interaction is deleted after INTENT_RETENTION_SECONDS without a message, while its job still waits for
    an operator; the job's callback then posted ``{"flow_type": "error", ...}`` with no protocol_version,
    interaction_id or attribution: no IntentWeb envelope. It posts the job's outcome as a signed envelope, with the
    job's id (what the agent got when the job was accepted) as external_id."""
    from tests.concierge.test_callbacks import Receiver

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


def trailing_newline(agent: Agent, field: str) -> dict:
    """A well-formed, signed envelope whose ``field`` ends in a newline."""
    if field == "interaction_id":
        agent.interaction_id += "\n"
    if field == "nonce":
        return agent.envelope("intent_request", "Book a tea-tasting", nonce="n-0123456789abcdef\n")
    body = agent.envelope("intent_request", "Book a tea-tasting")
    if field == "protocol_version":
        body["protocol_version"] += "\n"
    if field == "query_hash":
        body["attribution"]["query_hash"] += "\n"
    return body


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("interaction_id", "interaction_id"),
        ("nonce", "attribution.nonce"),
        ("protocol_version", "protocol_version"),
        ("query_hash", "attribution.query_hash"),
    ],
)
def test_an_id_with_a_trailing_newline_is_an_invalid_envelope(client, demo_content, field, path):
    """Python's ``$`` also matches before a final newline, so ``^[\\x21-\\x7e]{1,128}$`` let "conv-1\\n" through (and
    a nonce, a protocol_version, a query_hash the same way). The published patterns are ECMA-262's (JSON Schema's
    dialect), where ``$`` is the end of the string: they are read that way."""
    agent = Agent(client, secret=key())
    status, reply = agent.post(trailing_newline(agent, field))
    assert status == 400, reply
    assert reply["flow_type"] == "error"
    assert reply["message"].startswith("Invalid IntentWeb envelope"), reply
    assert reply["fields"] == [path]
    assert not Interaction.objects.filter(interaction_id__startswith=agent.interaction_id.strip()).exists()
