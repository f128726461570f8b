"""An IntentWeb interaction belongs to the actor that started it (§5: the attribution chain says who handles the intent;
its first entry is the actor that sent it): a later message naming another actor first in its chain, even with the same
API key, is refused with an error envelope and changes nothing. Before, any message with the interaction's credentials
continued it whatever its chain said, even when the intent_request's entry had been verified with a TrustedActorKey.
Real HTTP through the test client, signed as tests/intentweb/test_intentweb.py's Agent signs."""

from __future__ import annotations

import pytest

from agent_handshake.models import IntentNonce, Interaction, TrustedActorKey
from demo_site.shop.models import Appointment
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db

OWNER = "https://assistant.example/owner"
OTHER = "https://other.example/bot"


def same_interaction(client, agent: Agent, actor_id: str, secret: str | None) -> Agent:
    """Another agent (its own key pair) sending on ``agent``'s interaction with ``secret``, as ``actor_id``."""
    other = Agent(client, secret=secret, actor_id=actor_id)
    other.interaction_id, other.query_hash = agent.interaction_id, agent.query_hash
    return other


def started_booking(client, actor_id: str = OWNER, *, verified: bool = True) -> tuple[Agent, str]:
    secret = key()
    agent = Agent(client, secret=secret, actor_id=actor_id)
    if verified:
        TrustedActorKey.objects.create(actor_id=actor_id, public_key=agent.public_key, label="Owner")
    booking = tasting_booking()
    status, reply = agent.send("intent_request", f"Book a tea-tasting on {booking['date']} at 11:00")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    assert reply["required_fields"] == ["name", "email"]
    return agent, secret


def assert_refused_and_unchanged(agent: Agent, status: int, reply: dict, before: Interaction, nonce: str) -> None:
    assert status == 409, reply
    assert reply["flow_type"] == "error"
    assert reply["status"] == "interaction_in_use"
    assert reply["fields"] == ["attribution.chain.0.actor_id"]
    assert reply["interaction_id"] == agent.interaction_id
    after = Interaction.objects.get(interaction_id=agent.interaction_id)
    assert (after.collected, after.turns, after.status) == (before.collected, before.turns, before.status)
    assert not IntentNonce.objects.filter(nonce=nonce).exists()  # refused: the nonce is not spent
    assert not Appointment.objects.exists()


def test_another_actor_with_the_same_key_cannot_continue_a_verified_actors_interaction(client, demo_content):
    agent, secret = started_booking(client)
    before = Interaction.objects.get(interaction_id=agent.interaction_id)
    # Same API key, another actor (no key registered for it: its entry is merely unverified).
    impostor = same_interaction(client, agent, OTHER, secret)
    answer = "name: Mallory; email: mallory@example.com"
    status, reply = impostor.send("information_response", answer, nonce="actor-nonce-1")
    assert_refused_and_unchanged(agent, status, reply, before, "actor-nonce-1")
    # The owner's next message goes on as if nothing had happened.
    status, reply = agent.send("information_response", "name: Ada Lovelace; email: ada@example.com")
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    assert Appointment.objects.get().name == "Ada Lovelace"


def test_a_message_naming_no_actor_cannot_continue_an_actors_interaction(client, demo_content):
    agent, secret = started_booking(client, verified=False)
    before = Interaction.objects.get(interaction_id=agent.interaction_id)
    anonymous = same_interaction(client, agent, OTHER, secret)
    body = anonymous.envelope("information_response", "name: Mallory; email: m@example.com", nonce="actor-nonce-2")
    body["attribution"]["chain"] = []
    status, reply = anonymous.post(body)
    assert_refused_and_unchanged(agent, status, reply, before, "actor-nonce-2")
    # An unverified actor is bound too: another actor_id is refused, the same one (unverified as before) goes on.
    status, reply = same_interaction(client, agent, OTHER, secret).send("information_response", "name: Eve")
    assert (status, reply["status"]) == (409, "interaction_in_use")
    status, reply = agent.send("information_response", "name: Ada Lovelace; email: ada@example.com")
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply


def test_the_starting_actor_may_come_through_a_gateway(client, demo_content):
    """Only the first entry (the actor that sent the intent) is bound: a gateway may add its own after it."""
    agent, _ = started_booking(client)
    body = agent.envelope("information_response", "name: Ada Lovelace; email: ada@example.com")
    gateway = {**body["attribution"]["chain"][0], "actor_type": "ai_gateway", "actor_id": "https://gw.example"}
    body["attribution"]["chain"].append(gateway)
    status, reply = agent.post(body)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply


def test_a_verified_start_is_continued_only_verified(client, demo_content):
    """Once the operator no longer trusts the actor's key (deactivated), its unverifiable messages do not go on
    with the interaction its verified message started; they are refused as unauthenticated, changing nothing."""
    agent, _ = started_booking(client)
    before = Interaction.objects.get(interaction_id=agent.interaction_id)
    TrustedActorKey.objects.filter(actor_id=OWNER).update(active=False)
    status, reply = agent.send("information_response", "name: Ada Lovelace", nonce="actor-nonce-3")
    assert status == 401, reply
    assert (reply["flow_type"], reply["status"]) == ("error", "signature_required")
    assert reply["fields"] == ["attribution.chain.0.signature"]
    after = Interaction.objects.get(interaction_id=agent.interaction_id)
    assert (after.collected, after.turns) == (before.collected, before.turns)
    assert not IntentNonce.objects.filter(nonce="actor-nonce-3").exists()
    TrustedActorKey.objects.filter(actor_id=OWNER).update(active=True)
    status, reply = agent.send("information_response", "name: Ada Lovelace; email: ada@example.com")
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply


def test_an_ended_interactions_stored_answer_is_not_given_to_another_actor(client, demo_content):
    """The retry of the final message (same Idempotency-Key) gets the stored answer: only from the same actor."""
    agent, secret = started_booking(client)
    headers = {"HTTP_IDEMPOTENCY_KEY": "actor-final"}
    answer = "name: Ada Lovelace; email: ada@example.com"
    status, reply = agent.send("information_response", answer, headers=headers)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    impostor = same_interaction(client, agent, OTHER, secret)
    status, reply = impostor.send("information_response", answer, headers=headers)
    assert (status, reply["status"]) == (409, "interaction_in_use"), reply
    assert "external_id" not in reply
    status, again = agent.send("information_response", answer, headers=headers)
    assert (status, again["external_id"]) == (200, Appointment.objects.get().reference)
