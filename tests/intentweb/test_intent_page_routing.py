"""The intent page for people (``/intent-ui/``) routes a message only among the capabilities it lists.

The page lists what its own key (``INTENT_UI_SCOPES``) may do, but routed a person's message over every MODE3
capability: "Hello" or "Can someone call me back?" went to ``escalate_to_human`` and "where is my order 1234" to
``order_status``, and the person, who has no API key, got 403 "This API key lacks the scope ...". The page's
turns now route, clarify and continue among its own capabilities; ``POST /intent``, for agents with their own keys,
still routes over every capability.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agent_handshake.intentweb.flows import offered
from agent_handshake.models import Interaction
from tests.intentweb.test_intentweb import Agent, key

pytestmark = pytest.mark.django_db

#: What a person types that fits no capability the test settings' page (INTENT_UI_SCOPES ["book_appointment"])
#: offers; each was a 403 about an API key.
NOT_ON_THE_PAGE = [
    "Hello",
    "I need to talk to a person about a wholesale order",
    "Can someone call me back?",
    "where is my order 1234",
]


class Visitor:
    """A browser that opened the intent page: it sends what the page's script sends, with the page's CSRF token."""

    def __init__(self) -> None:
        self.browser = Client(enforce_csrf_checks=True)
        page = self.browser.get("/intent-ui/")
        assert page.status_code == 200
        #: The capabilities the page shows, by name.
        self.listed = {capability["name"] for capability in page.context["capabilities"]}
        self.token = self.browser.cookies["csrftoken"].value

    def says(self, message: str, **extra) -> tuple[int, dict]:
        response = self.browser.post(
            "/intent-ui/message",
            json.dumps({"message": message, **extra}),
            content_type="application/json",
            HTTP_X_CSRFTOKEN=self.token,
        )
        return response.status_code, response.json()

    def check_only_its_own(self, reply: dict) -> None:
        """A reply that offers, asks for or names no capability the page does not list."""
        assert reply["flow_type"] != "error", reply
        options = {option["name"] for option in reply.get("options", [])}
        assert options <= self.listed, (options, self.listed)
        if "capability" in reply:
            assert reply["capability"] in self.listed, reply
        for capability in offered():  # every capability an intent can reach
            if capability.name not in self.listed:
                assert capability.intent_text not in reply["message"], reply
        interaction = Interaction.objects.get(interaction_id=reply["interaction_id"])
        assert not interaction.capability or interaction.capability in self.listed
        assert set(interaction.candidates) <= self.listed


@pytest.mark.parametrize("message", NOT_ON_THE_PAGE)
def test_a_message_for_what_the_page_does_not_offer_gets_no_refusal_about_an_api_key(demo_content, message):
    visitor = Visitor()
    assert "book_appointment" in visitor.listed  # the test settings' INTENT_UI_SCOPES
    assert not visitor.listed & {"escalate_to_human", "order_status"}
    status, reply = visitor.says(message)
    assert status == 200, reply
    visitor.check_only_its_own(reply)
    # What the page can do is offered instead, as the unmatched intent of /intent is: a choice among the page's own.
    assert reply["flow_type"] == "clarification_request", reply
    assert reply["options"], reply


def test_without_scopes_the_page_offers_no_booking_for_a_booking_request(demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INTENT_UI_SCOPES": []}
    visitor = Visitor()
    assert "book_appointment" not in visitor.listed
    assert visitor.listed  # what needs no key: a stock check, a quote...
    status, reply = visitor.says("I want to book a tea tasting tomorrow")
    assert status == 200, reply
    visitor.check_only_its_own(reply)
    assert reply["flow_type"] == "clarification_request", reply
    # It says plainly that this is not something the page does, not which key it lacks.
    assert "not available on this page" in reply["message"], reply
    assert "API key" not in reply["message"]


def test_the_answer_to_the_pages_clarification_chooses_among_its_own(demo_content):
    visitor = Visitor()
    status, reply = visitor.says("Can someone call me back?")
    assert status == 200, reply
    interaction_id = reply["interaction_id"]
    # Naming a capability the page does not offer chooses nothing: the page's own are offered again.
    status, again = visitor.says("escalate_to_human", interaction_id=interaction_id)
    assert status == 200, again
    visitor.check_only_its_own(again)
    assert again["flow_type"] == "clarification_request", again
    options = [option["name"] for option in again["options"]]
    # A number chooses on the list the page gave.
    chosen = options.index("book_appointment") + 1
    status, reply = visitor.says(str(chosen), interaction_id=interaction_id)
    assert status == 200, reply
    visitor.check_only_its_own(reply)
    assert (reply["flow_type"], reply["capability"]) == ("information_request", "book_appointment"), reply


def test_a_message_that_fits_a_page_capability_still_runs_it(demo_content):
    visitor = Visitor()
    status, reply = visitor.says("Book a tea-tasting")
    assert status == 200, reply
    assert (reply["flow_type"], reply["capability"]) == ("information_request", "book_appointment"), reply
    status, reply = Visitor().says("Is LK-TEA-0001 in stock?")  # check_inventory needs no key
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result", reply
    assert Interaction.objects.get(interaction_id=reply["interaction_id"]).capability == "check_inventory"


def test_the_intent_endpoint_for_agents_still_routes_over_every_capability(client, demo_content):
    """``POST /intent`` is for agents with their own keys: a keyed agent reaches what its scopes allow, whatever
    the page's scopes, and one without the scope is told which it lacks."""
    agent = Agent(client, secret=key(scopes=("escalate_to_human",)))
    status, reply = agent.send("intent_request", "I need to talk to a person about a wholesale order")
    assert status == 200, reply
    assert (reply["flow_type"], reply["status"]) == ("information_response", "accepted"), reply
    assert Interaction.objects.get(interaction_id=agent.interaction_id).capability == "escalate_to_human"
    unscoped = Agent(client, secret=key(scopes=("book_appointment",)))
    status, reply = unscoped.send("intent_request", "where is my order LK-10001? ada@example.com")
    assert status == 403, reply
    assert reply["status"] == "forbidden"
    assert "'orders'" in reply["message"]
