"""IntentWeb answers whose JSON type the capability's field does not take (collected_information, structured): real HTTP
through the test client, a client written from the spec (tests/intentweb/test_intentweb.py's Agent, which checks every
reply against the upstream schema and the site's signature)."""

from __future__ import annotations

import pytest

from agent_handshake.models import IntentNonce, Interaction
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


WRONG_TYPES = [
    ("date", 20261127),
    ("date", None),
    ("date", ["2026-11-27"]),
    ("time", {"hour": 11}),
    ("email", True),
    ("party_size", "three"),
    ("party_size", 2.5),
    ("service", 5),
]


@pytest.mark.parametrize(("name", "value"), WRONG_TYPES)
def test_an_answer_of_the_wrong_type_is_refused_and_loses_nothing_stored(client, demo_content, name, value):
    """collected_information is structured: a value of a JSON type its field does not take is a malformed message,
    refused (400 invalid_request naming the field) before it changes anything. It was taken as an answer to ask
    again, dropping the valid value stored before it (a date collected, then lost to ``"date": 20261127``)."""
    booking = tasting_booking()
    agent = Agent(client, secret=key())
    agent.send("intent_request", "I'd like to book a tea-tasting in the shop")
    given = {"date": booking["date"], "time": "11:00", "email": "ada@example.com", "party_size": 2}
    status, reply = agent.send("information_response", "Here you are", collected_information=given)
    assert (status, reply["required_fields"]) == (200, ["name"]), reply
    stored = Interaction.objects.get(interaction_id=agent.interaction_id)
    before = (stored.collected, stored.turns, stored.asked, stored.status)
    body = agent.envelope("information_response", "A change", collected_information={name: value})
    status, reply = agent.post(body)
    assert status == 400, reply
    assert reply["flow_type"] == "error"
    assert reply["status"] == "invalid_request"
    assert reply["fields"] == [f"collected_information.{name}"]
    assert name in reply["message"]
    stored.refresh_from_db()
    assert (stored.collected, stored.turns, stored.asked, stored.status) == before
    assert not IntentNonce.objects.filter(nonce=body["attribution"]["nonce"]).exists()
    # The interaction goes on as it was: the last field completes the booking with every value kept.
    status, reply = agent.send("information_response", "Ada Lovelace")
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    assert reply["result"]["date"] == booking["date"]
    assert reply["result"]["party_size"] == 2


def test_a_value_of_the_right_type_that_is_invalid_is_still_asked_for_again(client, demo_content):
    """The line between the two: a string the field's format refuses is an answer to correct, not a malformed
    message (the site's question comes back naming it)."""
    agent = Agent(client, secret=key())
    agent.send("intent_request", "I'd like to book a tea-tasting in the shop")
    status, reply = agent.send("information_response", "x", collected_information={"time": "25:99"})
    assert (status, reply["flow_type"]) == (200, "information_request")
    assert "time" in reply["required_fields"]
    assert "25:99" in reply["message"]
