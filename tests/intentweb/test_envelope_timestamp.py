"""The envelope's top-level ``timestamp`` (§3.2: "ISO 8601 time when the sender created the message"; the upstream
envelope schema: ``format: date-time``) is read as the attribution's timestamps are: anything else is a 400 error
envelope naming it, which stores nothing and spends no nonce. Before, only ``attribution.timestamp`` was checked and
"next tuesday morning" was taken. Real HTTP through the test client."""

from __future__ import annotations

import pytest

from agent_handshake.models import IntentNonce, Interaction
from tests.intentweb.test_intentweb import Agent, now

pytestmark = pytest.mark.django_db


NOT_DATE_TIMES = ["next tuesday morning", "2025-13-45T99:00:00Z", "2025-10-15 at seven", "2025-10-15T19:23:41"]


@pytest.mark.parametrize("value", NOT_DATE_TIMES)
def test_a_top_level_timestamp_that_is_no_date_time_is_refused(client, demo_content, value):
    agent = Agent(client)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?", nonce="timestamp-nonce-1")
    body["timestamp"] = value
    status, reply = agent.post(body)
    assert status == 400, reply
    assert (reply["flow_type"], reply["status"]) == ("error", "invalid_request")
    assert reply["fields"] == ["timestamp"]
    assert reply["message"].startswith("timestamp "), reply
    assert value not in reply["message"]  # named, not quoted
    assert not Interaction.objects.filter(interaction_id=agent.interaction_id).exists()
    assert not IntentNonce.objects.filter(nonce="timestamp-nonce-1").exists()
    # The same message with a date-time (any UTC offset) is taken.
    body["timestamp"] = now().replace("Z", "+02:00")
    status, reply = agent.post(body)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply


def test_the_top_level_timestamp_stays_optional(client, demo_content):
    agent = Agent(client)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    del body["timestamp"]
    status, reply = agent.post(body)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
