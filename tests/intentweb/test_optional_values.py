"""An invalid value of an optional field is not dropped on the way to the action: the booking an agent asked for
with a party of 20 must not be made for a party of one."""

from __future__ import annotations

import pytest

from demo_site.shop.models import Appointment
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


def test_an_invalid_optional_value_is_asked_again_not_dropped(client, demo_content):
    booking = {name: value for name, value in tasting_booking().items() if name != "query"}
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    status, reply = agent.send(
        "information_response", "here it is", collected_information={**booking, "party_size": 20}
    )
    assert status == 200, reply
    assert reply["flow_type"] == "information_request", reply
    assert not Appointment.objects.exists()  # nothing booked for a party the agent did not ask for
    assert "20 is not a valid party\\_size: must be at most 6" in reply["message"]  # named, so it can be corrected
    assert "party_size" in reply["required_fields"]
    assert "party_size" not in reply["collected_information"]
    assert reply["collected_information"]["name"] == booking["name"]  # nothing else collected is lost

    # Corrected, the booking is made with the value sent.
    status, reply = agent.send("information_response", "four of us", collected_information={"party_size": 4})
    assert reply["flow_type"] == "execution_result", reply
    assert Appointment.objects.get().party_size == 4


def test_a_message_that_leaves_the_optional_field_out_goes_on_without_it(client, demo_content):
    booking = {name: value for name, value in tasting_booking().items() if name != "query"}
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    _, reply = agent.send("information_response", "here", collected_information={**booking, "party_size": 0})
    assert reply["flow_type"] == "information_request", reply
    assert "leave it out" in reply["message"]
    _, reply = agent.send("information_response", "Never mind the party size.")
    assert reply["flow_type"] == "execution_result", reply
    assert Appointment.objects.get().party_size == 1
