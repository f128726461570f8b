"""IntentWeb §3.4 lets either side send ``information_request`` and ``clarification_request``: from a client they
ask the site something ("Do you have vegan options?"); they answer nothing. The site read a client's question as
the answer to its own: asked for the name of a booking, an agent's "Is there parking near the shop?" booked a
tasting under that name."""

from __future__ import annotations

import pytest

from agent_handshake.models import Interaction
from demo_site.shop.models import Appointment
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("flow_type", ["information_request", "clarification_request"])
def test_a_clients_question_is_not_taken_as_the_answer_to_the_sites(client, demo_content, flow_type):
    booking = {name: value for name, value in tasting_booking().items() if name not in ("query", "name")}
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a tea-tasting")
    status, reply = agent.send("information_response", "here", collected_information=booking)
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["name"]), reply

    status, reply = agent.send(flow_type, "Is there parking near the shop?")
    assert status == 200, reply
    assert not Appointment.objects.exists()  # no booking under the question's text
    assert reply["flow_type"] == "information_request", reply
    assert reply["required_fields"] == ["name"]  # the site's question stands
    assert "name" not in reply["collected_information"]
    assert "parking" not in reply["message"]
    assert {name: reply["collected_information"][name] for name in booking} == booking  # nothing collected is lost

    # The answer to the site's question still is one.
    status, reply = agent.send("information_response", "Ada Lovelace")
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    assert Appointment.objects.get().name == "Ada Lovelace"


def test_a_clients_question_chooses_no_option_of_a_clarification(client, demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every capability is close
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I need something from the shop")
    assert (status, reply["flow_type"]) == (200, "clarification_request"), reply
    asked_about = reply["options"][0]["intent"]
    status, reply = agent.send("information_request", f"How long does '{asked_about}' take?")
    assert (status, reply["flow_type"]) == (200, "clarification_request"), reply
    interaction = Interaction.objects.get(interaction_id=agent.interaction_id)
    assert (interaction.status, interaction.capability) == (Interaction.Status.CLARIFYING, "")
    listed = [option["name"] for option in reply["options"]]
    status, reply = agent.send("information_response", "2")
    assert reply["flow_type"] != "clarification_request", reply
    assert Interaction.objects.get(interaction_id=agent.interaction_id).capability == listed[1]
