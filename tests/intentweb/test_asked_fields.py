"""The plain answer to the site's question fills the field it asked for, required or optional.

After the site refused an invalid value of an optional field (book_appointment's party_size of 20, over its maximum
of 6) it asked for that field; the client's plain answer ("4") was ignored, since a plain answer was read only for
a required field that was missing, and the tasting was booked for the default party of one. The site now remembers
which fields its last question asked for, and a plain answer fills the one it asked for, validated as any value is.
"""

from __future__ import annotations

import pytest

from agent_handshake.models import Interaction
from demo_site.shop.models import Appointment
from tests.intentweb.test_intent_page_routing import Visitor
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


def booking() -> dict:
    return {name: value for name, value in tasting_booking().items() if name != "query"}


def refused_party(reply: dict, value: int) -> None:
    """``reply`` asks again for party_size alone, having refused ``value``, and has booked nothing."""
    assert reply["flow_type"] == "information_request", reply
    assert f"{value} is not a valid party\\_size" in reply["message"], reply
    assert reply["required_fields"] == ["party_size"], reply
    assert not Appointment.objects.exists()


def test_a_plain_answer_fills_the_optional_field_the_site_asked_for(client, demo_content):
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    status, reply = agent.send("information_response", "here", collected_information={**booking(), "party_size": 20})
    assert status == 200, reply
    refused_party(reply, 20)
    status, reply = agent.send("information_response", "4")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result", reply
    assert reply["collected_information"]["party_size"] == 4
    assert Appointment.objects.get().party_size == 4


def test_an_invalid_plain_answer_is_refused_and_asked_again(client, demo_content):
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    agent.send("information_response", "here", collected_information={**booking(), "party_size": 20})
    status, reply = agent.send("information_response", "We are 9 people.")
    assert status == 200, reply
    refused_party(reply, 9)
    status, reply = agent.send("information_response", "Then 3 of us.")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result", reply
    assert Appointment.objects.get().party_size == 3


def test_a_plain_answer_still_fills_a_required_field_asked_for(client, demo_content):
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    given = {name: value for name, value in booking().items() if name != "name"}
    status, reply = agent.send("information_response", "here", collected_information=given)
    assert status == 200, reply
    assert reply["required_fields"] == ["name"], reply
    assert Interaction.objects.get(interaction_id=agent.interaction_id).asked == ["name"]
    status, reply = agent.send("information_response", "Grace Hopper")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result", reply
    assert Appointment.objects.get().name == "Grace Hopper"


def test_the_intent_pages_plain_answer_fills_the_optional_field_it_asked_for(demo_content):
    visitor = Visitor()
    status, reply = visitor.says("Book a tea-tasting")
    assert status == 200, reply
    assert (reply["flow_type"], reply["capability"]) == ("information_request", "book_appointment"), reply
    interaction_id = reply["interaction_id"]
    form = {name: str(value) for name, value in booking().items()}  # the page's form sends text
    status, reply = visitor.says("", interaction_id=interaction_id, collected_information={**form, "party_size": "20"})
    assert status == 200, reply
    refused_party(reply, 20)
    status, reply = visitor.says("4", interaction_id=interaction_id)
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result", reply
    assert Appointment.objects.get().party_size == 4
