"""Bounds on an IntentMessage's ``id`` and ``intent_vector`` at the Agent Semantic Protocol front door
(POST /agent/asp).

``id`` is echoed back as the NegotiationResponse's ``request_id``: only the body cap bounded it. It takes at most 128
characters, what the JSON doors take of an identifier the client chooses (AHP's ``session_id``, IntentWeb's
``interaction_id``). ``intent_vector`` takes at most 8192 items, as AHP's ``context.intent_vector`` does. Longer is
refused (400 ``invalid_request`` naming the field) before the intent is answered, so its signature is not spent: the
same bytes are refused the same way again (not as a replay), and the corrected intent is answered.

The agent is the test-side one of tests/asp/test_asp.py (the spec's framing, ``cryptography`` for the signatures).
"""

from __future__ import annotations

import json

import pytest

from agent_handshake.asp import asp_pb2
from agent_handshake.models import SeenSignature
from tests.asp.test_asp import Agent, error_of, frame, post, unframe

pytestmark = pytest.mark.django_db

QUESTION = "What is the best water temperature for gyokuro tea?"
MAX_ID = 128
MAX_VECTOR = 8192


@pytest.fixture
def big_bodies(settings):
    """A body cap that lets 8193 floats through: the cap is not what refuses here."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "MAX_REQUEST_BYTES": 65536}


def answered(response) -> asp_pb2.NegotiationResponse:
    assert response.status_code == 200, response.content
    answer = unframe(response.content)
    assert isinstance(answer, asp_pb2.NegotiationResponse)
    return answer


def refused_unspent(client, intent: asp_pb2.IntentMessage, field: str, limit: int) -> None:
    """``intent`` is refused (400 invalid_request naming ``field`` and its limit), nothing answered, and its signature
    not spent: sent again, it is refused the same way, not as a replay."""
    spent = SeenSignature.objects.count()
    for _ in range(2):
        response = post(client, frame(intent))
        body = error_of(response, 400, "invalid_request")
        assert body["fields"] == [field], body
        assert str(limit) in body["message"], body
        assert intent.id not in response.content.decode()  # not echoed
    assert SeenSignature.objects.count() == spent


def test_an_intent_id_over_128_characters_is_refused_not_echoed(client, demo_content, big_bodies):
    """A 10,000-character id was echoed whole as request_id (200, accepted)."""
    agent = Agent(client)
    agent.handshake()
    for long in ("i" * (MAX_ID + 1), "x" * 10_000, "é" * (MAX_ID + 1)):
        refused_unspent(client, agent.intent(QUESTION, id=long), "id", MAX_ID)
    # The corrected intent is answered, its id echoed whole; characters count, not bytes.
    for at_limit in ("i" * MAX_ID, "é" * MAX_ID):
        intent = agent.intent(QUESTION, id=at_limit)
        answer = answered(post(client, frame(intent)))
        assert answer.accepted, answer.reason
        assert answer.request_id == at_limit
        error_of(post(client, frame(intent)), 401, "replayed")  # answered once, spent now


def test_an_intent_vector_over_8192_items_is_refused_as_ahp_refuses_it(client, demo_content, big_bodies):
    """An intent_vector of 8193 (or 16000) numbers was taken (200, accepted); AHP's context.intent_vector takes at
    most 8192."""
    over = [0.25] * (MAX_VECTOR + 1)
    converse = {"ahp": "0.1", "query": QUESTION, "context": {"intent_vector": over}}
    ahp = client.post("/agent/converse", json.dumps(converse), content_type="application/json")
    assert ahp.status_code == 400, ahp.content
    assert (ahp.json()["code"], ahp.json()["fields"]) == ("invalid_request", ["context.intent_vector"])

    agent = Agent(client)
    agent.handshake()
    for vector in (over, [0.25] * 16_000):
        refused_unspent(client, agent.intent(QUESTION, intent_vector=vector), "intent_vector", MAX_VECTOR)
        refused_unspent(client, agent.intent(QUESTION, intent_vector=vector, capabilities=["content_search"]),
                        "intent_vector", MAX_VECTOR)  # fmt: skip
    # At the limit: taken (not the site model's dimensions, so the payload routes it) and answered.
    for capabilities in ([], ["content_search"]):
        intent = agent.intent(QUESTION, intent_vector=[0.25] * MAX_VECTOR, capabilities=capabilities)
        answer = answered(post(client, frame(intent)))
        assert answer.accepted, answer.reason
        assert answer.request_id == intent.id
        error_of(post(client, frame(intent)), 401, "replayed")
