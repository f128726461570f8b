"""IntentWeb's information_request asks for missing input as every other door asks (AHP's clarification, MCP's
missing_field, NLWeb's elicitation): it says what the last answer gave ("Thank you: I have email now.", or that it
gave nothing asked for) and, when it asks for several values, how to label them in one answer, with an example an
agent can fill in as it stands. IntentWeb worded its own question, which said neither. Real HTTP through the test
client (tests/concierge/test_missing_input_answers.py's Door, which asks the other doors the same way)."""

from __future__ import annotations

import re

import pytest

from demo_site.shop.models import Appointment
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db

LABEL_HINT = 'Give each value after its name, one per line or separated by ";"'


def test_the_label_example_can_be_filled_in_as_it_stands(client, demo_content):
    """The example names the fields as an answer must label them (party_size, not the markdown escape
    party\\_size, which no label reader takes): filled in, it is the answer that books."""
    booking = tasting_booking()
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", f"Book a tea-tasting on {booking['date']} at 11:00")
    assert reply["required_fields"] == ["name", "email"], reply
    status, reply = agent.send("information_response", "see below", collected_information={"party_size": 20})
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    assert reply["required_fields"] == ["name", "email", "party_size"]
    assert "That did not work" in reply["message"]  # the refusal of 20 is still said first
    (example,) = re.findall(re.escape(LABEL_HINT) + r' \("([^"]+)"\)', reply["message"])
    values = {"name": "Ada Lovelace", "email": "ada@example.com", "party_size": "2"}
    labels = [part.split(":")[0].strip() for part in example.split(";")]
    assert labels == ["name", "email", "party_size"]
    answer = "; ".join(f"{label}: {values[label]}" for label in labels)
    status, reply = agent.send("information_response", answer)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    appointment = Appointment.objects.get()
    assert (appointment.name, appointment.email, appointment.party_size) == ("Ada Lovelace", "ada@example.com", 2)
