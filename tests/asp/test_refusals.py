"""Refusals at the Agent Semantic Protocol front door (POST /agent/asp): which of them leave a signed intent's
signature unspent, and which limits the protobuf binding shares with the JSON front doors.

A signed intent is answered at most once: a replay of one that was answered (accepted or not) is refused, whatever
the sender does first. An intent refused before it was answered (429, 503) may be sent again unchanged, as the
refusal says (Retry-After, "may be retried"). And what POST /agent/handshake and POST /agent/converse refuse (an
``agent_id`` over 200 characters, a capability name over 100, a question over 4096 characters), the protobuf
binding refuses with the same status and code instead of cutting it silently.

The agent here is written from the spec (§4 framing, the .proto) with ``struct``, ``hashlib`` and ``cryptography``:
the helpers come from tests/asp/test_asp.py, test-side code; none of the server's own helpers are used.
"""

from __future__ import annotations

import base64
import json
import secrets
import time

import pytest
from django.core.cache import caches

from agent_handshake.asp import asp_pb2
from agent_handshake.conf import app_settings
from agent_handshake.models import EmbeddingIndex, VerifiedAgent
from tests.asp.test_asp import Agent, error_of, frame, handshake_bytes, post, unframe

pytestmark = pytest.mark.django_db

QUESTION = "How hot should the water be for gyokuro?"


def configure(settings, **values):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, **values}


def answered(response) -> asp_pb2.NegotiationResponse:
    assert response.status_code == 200, response.content
    answer = unframe(response.content)
    assert isinstance(answer, asp_pb2.NegotiationResponse)
    return answer


def one_per_second(settings):
    """A verified agent (its tier: "authenticated") may send one request a second; handshakes (anonymous) are not
    held back."""
    configure(
        settings,
        RATE_LIMITS={"unauthenticated": {"requests": "100/minute"}, "authenticated": {"requests": "1/second"}},
    )


def rate_limited(client, agent) -> tuple[asp_pb2.IntentMessage, int]:
    """A fresh signed intent refused with 429, and its Retry-After: intents are sent until one lands in a second
    that already had one."""
    for _ in range(10):
        intent = agent.intent(QUESTION, capabilities=["content_search"])
        response = post(client, frame(intent))
        if response.status_code == 429:
            body = error_of(response, 429, "rate_limited")
            retry_after = int(response["Retry-After"])
            assert body["retry_after"] == retry_after >= 1
            return intent, retry_after
        answered(response)
    pytest.fail("No intent was refused with 429 at one request a second.")


def search_unavailable():
    """The stored passages are another embedding model's: search answers 503 until the index is rebuilt (rolled back
    after the test); the cached answers go too."""
    model = EmbeddingIndex.objects.get().model_id
    EmbeddingIndex.objects.update(model_id="another-model")
    caches[app_settings.CACHE_ALIAS].clear()
    return model


def search_restored(model: str) -> None:
    EmbeddingIndex.objects.update(model_id=model)
    caches[app_settings.CACHE_ALIAS].clear()


# --- a refused intent may be retried; an answered one is never answered twice -----------------------------------


def test_an_intent_refused_with_429_is_accepted_unchanged_after_retry_after(
    client, demo_content, settings, time_machine
):
    """The 429 said Retry-After; the identical intent sent then was refused as a replay (401), its signature spent
    by the refusal."""
    one_per_second(settings)
    agent = Agent(client)
    agent.handshake()
    intent, retry_after = rate_limited(client, agent)
    time_machine.move_to(time.time() + retry_after)
    answer = answered(post(client, frame(intent)))
    assert answer.accepted, answer.reason
    assert answer.request_id == intent.id
    # Answered once: the same bytes again are a replay, however soon.
    error_of(post(client, frame(intent)), 401, "replayed")
    time_machine.shift(1)
    error_of(post(client, frame(intent)), 401, "replayed")


def test_an_intent_refused_with_503_is_accepted_unchanged_once_search_is_back(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    intent = agent.intent(QUESTION, capabilities=["content_search"])
    model = search_unavailable()
    error_of(post(client, frame(intent)), 503, "unavailable")
    error_of(post(client, frame(intent)), 503, "unavailable")  # still not answered: still not spent
    search_restored(model)
    answer = answered(post(client, frame(intent)))
    assert answer.accepted, answer.reason
    error_of(post(client, frame(intent)), 401, "replayed")


def test_an_answered_intent_stays_spent_whatever_refusal_its_replay_provokes(
    client, demo_content, settings, time_machine
):
    """Replaying an answered intent while the agent is rate limited or search is down is refused as a replay, and
    leaves it spent: no refusal gives back a signature its own request did not spend."""
    agent = Agent(client)
    agent.handshake()
    accepted = agent.intent(QUESTION, capabilities=["content_search"])
    assert answered(post(client, frame(accepted))).accepted
    declined = agent.intent("Generate a sort function", capabilities=["code-gen"])
    assert not answered(post(client, frame(declined))).accepted  # answered, though not accepted: spent too

    model = search_unavailable()
    for intent in (accepted, declined):
        error_of(post(client, frame(intent)), 401, "replayed")
    search_restored(model)
    for intent in (accepted, declined):
        error_of(post(client, frame(intent)), 401, "replayed")

    one_per_second(settings)
    rate_limited(client, agent)  # the agent is over its limit now
    for intent in (accepted, declined):
        response = post(client, frame(intent))
        assert response.status_code in (401, 429), response.content
        assert response.status_code != 429 or response.json()["code"] == "rate_limited"
    time_machine.move_to(time.time() + 1)  # the limit's second is over
    for intent in (accepted, declined):
        error_of(post(client, frame(intent)), 401, "replayed")


def test_replays_of_an_answered_intent_do_not_use_up_the_agents_own_limit(client, demo_content, settings):
    """Whoever replays a captured intent is refused as a replay before the agent's count: the replays cannot keep
    the agent whose message it was at its limit."""
    configure(
        settings, RATE_LIMITS={"unauthenticated": {"requests": "100/minute"}, "authenticated": {"requests": "2/hour"}}
    )
    agent = Agent(client)
    agent.handshake()
    intent = agent.intent(QUESTION, capabilities=["content_search"])
    assert answered(post(client, frame(intent))).accepted
    for _ in range(3):
        error_of(post(client, frame(intent)), 401, "replayed")
    assert answered(post(client, frame(agent.intent(QUESTION, capabilities=["content_search"])))).accepted
    error_of(post(client, frame(agent.intent(QUESTION, capabilities=["content_search"]))), 429, "rate_limited")


def test_a_replay_refused_while_the_original_is_refused_does_not_spend_it(client, demo_content, settings):
    """A second copy of an intent sent while the first copy's refusals stand is refused the same way (not as a
    replay of a message that was never answered), and the copy sent when the refusal is lifted is answered, once."""
    agent = Agent(client)
    agent.handshake()
    verified = VerifiedAgent.objects.get(did=agent.did)
    intent = agent.intent(QUESTION, capabilities=["content_search"])
    VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=True)
    error_of(post(client, frame(intent)), 403, "blocked")
    error_of(post(client, frame(intent)), 403, "blocked")
    VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=False)
    assert answered(post(client, frame(intent))).accepted
    error_of(post(client, frame(intent)), 401, "replayed")


# --- the protobuf binding refuses what the JSON binding refuses ---------------------------------------------------


def words(length: int) -> str:
    """A question of exactly ``length`` characters."""
    text = QUESTION + " Please answer for green tea."
    while len(text) < length:
        text += " gyokuro"
    return text[:length].rstrip() + "?" * (length - len(text[:length].rstrip()))


def test_an_intent_payload_over_4096_characters_is_refused_as_the_json_doors_refuse_a_query(
    client, demo_content, settings
):
    """A 7,600-character payload naming content_search was answered (200, accepted): only the body cap limited it.
    POST /agent/converse refuses a query over 4096 characters (and NLWeb a query.text)."""
    configure(settings, MAX_REQUEST_BYTES=65536)  # the body cap is not what refuses here
    long = words(4097)
    assert len(long) == 4097
    ahp = client.post("/agent/converse", json.dumps({"ahp": "0.1", "capability": "content_search", "query": long}),
                      content_type="application/json")  # fmt: skip
    assert ahp.status_code == 400, ahp.content
    assert ahp.json()["code"] == "invalid_request"
    assert "query" in ahp.json()["fields"]

    agent = Agent(client)
    agent.handshake()
    for payload in (long, words(7600), "é" * 4097):
        body = error_of(post(client, frame(agent.intent(payload, capabilities=["content_search"]))), 400,
                        "invalid_request")  # fmt: skip
        assert body["fields"] == ["payload"]
        assert "4096" in body["message"]
    # Characters, not bytes: 4096 of them are a question, whatever their encoding's length.
    for payload in (words(4096), ("Quelle température de l'eau pour le gyokuro ? " * 100)[:4096]):
        assert len(payload) == 4096
        answered(post(client, frame(agent.intent(payload, capabilities=["content_search"]))))


def test_a_handshake_agent_id_or_capability_too_long_is_refused_as_post_agent_handshake_refuses_it(client):
    """HandshakeMessage.agent_id and capabilities were cut to 200 and 100 characters; the JSON handshake refuses
    them (400 invalid_request naming the field)."""

    def b64url(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    cases = [("agent_id", "a" * 201, ["shopping"]), ("capabilities", "proto-agent", ["shopping", "c" * 101])]
    for field, agent_id, capabilities in cases:
        agent = Agent(client)
        hello = {"did": agent.did, "public_key": b64url(agent.public), "challenge": b64url(secrets.token_bytes(32)),
                 "agent_id": agent_id, "capabilities": capabilities, "version": "1.0.0",
                 "timestamp": int(time.time())}  # fmt: skip
        response = client.post("/agent/handshake", json.dumps(hello), content_type="application/json")
        assert response.status_code == 400, response.content
        assert (response.json()["code"], response.json()["fields"]) == ("invalid_request", [field])

        message = agent.hello()
        message.agent_id = agent_id
        message.ClearField("capabilities")
        message.capabilities.extend(capabilities)
        body = error_of(post(client, frame(message)), 400, "invalid_request")
        assert body["fields"] == [field]
    assert not VerifiedAgent.objects.exists()


def test_a_handshake_at_the_limits_is_stored_whole(client):
    agent = Agent(client)
    hello = agent.hello()
    hello.agent_id = "a" * 199 + "é"
    hello.ClearField("capabilities")
    hello.capabilities.extend(["c" * 99 + "ü", "shopping"])
    answer = unframe(post(client, frame(hello)).content)
    signature = agent.key.sign(handshake_bytes("initiator", agent.did, answer.did, answer.challenge))
    second = asp_pb2.HandshakeMessage(did=agent.did, challenge=answer.challenge, challenge_response=signature)
    assert post(client, frame(second)).status_code == 200
    verified = VerifiedAgent.objects.get(did=agent.did)
    assert verified.agent_id == "a" * 199 + "é"
    assert verified.capabilities == ["c" * 99 + "ü", "shopping"]


def test_an_intent_naming_too_many_or_too_long_capabilities_is_refused_not_cut(client, demo_content):
    """An intent's capabilities were cut to their first 50, as a handshake's were: refused as a handshake's are."""
    agent = Agent(client)
    agent.handshake()
    many = [f"capability_{n}" for n in range(50)] + ["content_search"]
    body = error_of(post(client, frame(agent.intent(QUESTION, capabilities=many))), 400, "invalid_request")
    assert body["fields"] == ["capabilities"]
    long = ["content_search", "c" * 101]
    body = error_of(post(client, frame(agent.intent(QUESTION, capabilities=long))), 400, "invalid_request")
    assert body["fields"] == ["capabilities"]
    # At the limits: answered (the names the site lacks are said so in the reason).
    fifty = [f"capability_{n}" for n in range(49)] + ["c" * 100]
    answer = answered(post(client, frame(agent.intent(QUESTION, capabilities=fifty))))
    assert not answer.accepted
    assert "capability_0" in answer.reason
