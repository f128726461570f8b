"""A request that only names a topic ("tea", "green tea") on POST /agent/converse without ``capability``: a question
about the content, never an action, so an anonymous agent gets an answer rather than a 401 for a capability it never
asked for. On the demo content, with the real embedding model and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings

from agent_handshake.concierge import routing
from agent_handshake.conf import app_settings
from agent_handshake.models import AgentClient, ApiKey, ConverseSession
from agent_handshake.registry import capability_registry
from agent_handshake.retrieval.embeddings import get_embedding_backend

pytestmark = pytest.mark.django_db

URL = "/agent/converse"
#: Topics of the demo's content, each of which an anonymous agent's bare request routed to a capability that
#: requires authentication (book_appointment: its examples say "tea tasting"; order_status), and got a 401.
TOPICS = ["tea", "green tea", "tea set", "tasting", "samplers", "orders"]
ORDER_REQUEST = "where is my order LK-1234"


def ask(client, body, **headers):
    response = client.post(URL, data=json.dumps({"ahp": "0.1", **body}), content_type="application/json", **headers)
    return response, response.json()


def credentials():
    agent, _ = AgentClient.objects.get_or_create(name="Routing agent")
    _key, secret = ApiKey.objects.issue(agent, scopes=["*"])
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.mark.parametrize("topic", TOPICS)
def test_a_bare_topic_is_answered_from_the_content_not_refused_for_an_action(client, demo_content, topic):
    # Its fit to the action is as high as a real request's: "tasting" fits book_appointment as well as "book
    # tasting" does, "orders" fits order_status nearly as well as "where is my order".
    capabilities = [c for c in capability_registry.available() if c.handler]
    best = routing.rank(topic, capabilities)[0]
    assert best.capability.requires_auth or best.capability.action_type, best
    response, body = ask(client, {"query": topic})
    assert response.status_code == 200, body
    assert body["status"] == "success", body
    assert body["meta"]["mode"] == "MODE2", body


def test_an_action_request_still_goes_to_its_action_and_an_anonymous_agent_is_asked_to_authenticate(
    client, demo_content
):
    response, body = ask(client, {"query": ORDER_REQUEST})
    assert response.status_code == 401, body
    assert body["code"] == "auth_required", body
    assert "order_status" in body["message"], body

    response, body = ask(client, {"query": ORDER_REQUEST}, **credentials())
    assert response.status_code == 200, body
    assert body["status"] == "clarification_needed", body  # the email address it was placed with
    assert ConverseSession.objects.get(pk=body["session_id"]).capability == "order_status"


def test_a_bare_topic_with_credentials_is_answered_from_the_content_too(client, demo_content):
    # Not a matter of who asks: a topic asks for no action, whoever sends it.
    response, body = ask(client, {"query": "tea"}, **credentials())
    assert response.status_code == 200, body
    assert (body["status"], body["meta"]["mode"]) == ("success", "MODE2"), body


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("tea", True),
        ("Green tea?", True),
        ("loose-leaf", True),
        ("緑茶", True),  # two characters of a script written without spaces: two words
        ("track LK-1234", False),  # a number: an identifier, a quantity, a date, input for an action
        ("order 5", False),
        ("where is my order", False),
        ("注文はどこですか", False),
        ("", False),
        ("  ?! ", False),
    ],
)
def test_a_topic_is_a_word_or_two_with_no_number(text, topic):
    assert routing.names_a_topic(text) is topic


def test_the_topic_rule_can_be_turned_off(client, demo_content):
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "ROUTING_TOPIC_WORDS": 0}):
        assert app_settings.ROUTING_TOPIC_WORDS == 0
        assert not routing.names_a_topic("tea")
        response, body = ask(client, {"query": "tea"})
    assert response.status_code == 401, body  # book_appointment, by the examples' "tea tasting"


def test_an_intent_vector_is_the_agents_intent_whatever_the_query_says(client, demo_content):
    # The rule reads the text the site embeds; an agent's vector says what it means, and may mean an action.
    vector = [round(float(x), 6) for x in get_embedding_backend().embed([ORDER_REQUEST])[0]]
    response, body = ask(client, {"query": "orders", "context": {"intent_vector": vector}})
    assert response.status_code == 401, body
    assert "order_status" in body["message"], body
