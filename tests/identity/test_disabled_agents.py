"""A verified agent whose own API key an operator revoked (or let expire), or whose agent client an operator made
inactive, is refused at once and clearly, as a blocked DID is: the handshake (JSON and protobuf, either step)
answers 403 with ``key_revoked``, ``key_expired`` or ``client_inactive`` instead of issuing a session credential
that every door then refused with a generic 401, and a live session credential or a signed intent gets the same
403 and code on every door. Taking the key or the client back into use lets the agent in again, its trust kept.
"""

from __future__ import annotations

import datetime
import json
import time

import pytest
from django.utils import timezone

from agent_handshake.asp import asp_pb2
from agent_handshake.models import AgentClient, AgentSession, ApiKey, TrustEvent, VerifiedAgent
from tests.asp.test_asp import Agent as ProtoAgent
from tests.asp.test_asp import error_of, frame, handshake_bytes, unframe
from tests.asp.test_asp import post as post_frame
from tests.identity.test_verified_agents import Agent, b64url, post, signed_bytes, unb64url
from tests.intentweb.test_intentweb import Agent as IntentAgent

pytestmark = pytest.mark.django_db

QUESTION = "How hot should the water be for gyokuro?"


def revoke(did: str) -> None:
    ApiKey.objects.filter(verified_agent__did=did).update(revoked_at=timezone.now())


def expire(did: str) -> None:
    ApiKey.objects.filter(verified_agent__did=did).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))


def deactivate(did: str) -> None:
    AgentClient.objects.filter(keys__verified_agent__did=did).update(is_active=False)


def restore(did: str) -> None:
    ApiKey.objects.filter(verified_agent__did=did).update(revoked_at=None, expires_at=None)
    AgentClient.objects.filter(keys__verified_agent__did=did).update(is_active=True)


DISABLE = [(revoke, "key_revoked"), (expire, "key_expired"), (deactivate, "client_inactive")]


def refused(response, code: str) -> None:
    assert response.status_code == 403, response.content[:400]
    assert response["Content-Type"].startswith("application/json")
    assert json.loads(response.content)["code"] == code, response.content[:400]


def nlweb_refused(response, code: str) -> None:
    assert response.status_code == 403, response.content[:400]
    assert response.json()["error"]["code"] == code.upper(), response.content[:400]  # NLWeb's letter case


def mcp_refused(response, code: str) -> None:
    assert response.status_code == 403, response.content[:400]
    error = response.json()["error"]
    assert error["data"]["code"] == code, error


@pytest.mark.parametrize(("disable", "code"), DISABLE)
def test_a_json_handshake_of_a_disabled_agent_is_refused_with_its_code(client, demo_content, disable, code):
    agent = Agent(client)
    agent.handshake()
    sessions = AgentSession.objects.count()
    disable(agent.did)
    response, _ = agent.begin()
    refused(response, code)
    assert "operators" in response.json()["message"]
    assert AgentSession.objects.count() == sessions  # no credential that every door would refuse
    restore(agent.did)
    assert agent.handshake()["did"] == agent.did


def test_an_agent_disabled_between_the_two_messages_gets_no_credential(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    response, _ = agent.begin()
    answer = response.json()
    revoke(agent.did)
    signature = agent.key.sign(signed_bytes("initiator", agent.did, answer["did"], unb64url(answer["challenge"])))
    body = {"handshake_id": answer["handshake_id"], "did": agent.did, "challenge_response": b64url(signature)}
    sessions = AgentSession.objects.count()
    refused(post(client, "/agent/handshake/verify", body), "key_revoked")
    assert AgentSession.objects.count() == sessions


@pytest.mark.parametrize(("disable", "code"), DISABLE)
def test_a_live_session_of_a_disabled_agent_is_refused_with_its_code_on_every_door(client, demo_content, disable, code):
    agent = Agent(client)
    agent.handshake()
    verified = VerifiedAgent.objects.get(did=agent.did)
    events = TrustEvent.objects.filter(agent=verified).count()
    disable(agent.did)
    ahp = {"ahp": "0.1", "capability": "content_search", "query": QUESTION}
    refused(post(client, "/agent/converse", ahp, **agent.headers), code)
    refused(post(client, "/capabilities/content_search", {"query": QUESTION}, **agent.headers), code)
    nlweb_refused(post(client, "/ask", {"query": {"text": QUESTION}}, **agent.headers), code)
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "content_search", "arguments": {"query": QUESTION}}}  # fmt: skip
    mcp_refused(post(client, "/mcp", rpc, **agent.headers), code)
    status, reply = IntentAgent(client).send("intent_request", "Is LK-TEA-0001 in stock?", headers=agent.headers)
    assert status == 403, reply
    assert code in json.dumps(reply), reply
    # Refused before it was the agent's request: its trust does not move.
    assert TrustEvent.objects.filter(agent=verified).count() == events
    restore(agent.did)
    assert post(client, "/agent/converse", ahp, **agent.headers).status_code == 200


@pytest.mark.parametrize(("disable", "code"), DISABLE)
def test_the_protobuf_handshake_and_signed_intents_of_a_disabled_agent_are_refused(client, demo_content, disable, code):
    agent = ProtoAgent(client)
    agent.handshake()
    intent = agent.intent(QUESTION, capabilities=["content_search"])
    disable(agent.did)
    error_of(post_frame(client, frame(agent.hello())), 403, code)
    error_of(post_frame(client, frame(intent)), 403, code)
    restore(agent.did)
    # Refused before it was answered: the same intent, sent again unchanged, is answered now.
    answer = unframe(post_frame(client, frame(intent)).content)
    assert isinstance(answer, asp_pb2.NegotiationResponse)
    assert answer.accepted


def test_the_protobuf_second_message_of_a_disabled_agent_gets_no_credential(client, demo_content):
    agent = ProtoAgent(client)
    agent.handshake()
    hello = agent.hello()
    answer = unframe(post_frame(client, frame(hello)).content)
    deactivate(agent.did)
    signature = agent.key.sign(handshake_bytes("initiator", agent.did, answer.did, answer.challenge))
    second = asp_pb2.HandshakeMessage(did=agent.did, challenge=answer.challenge, challenge_response=signature,
                                      timestamp=time.time_ns())  # fmt: skip
    sessions = AgentSession.objects.count()
    error_of(post_frame(client, frame(second)), 403, "client_inactive")
    assert AgentSession.objects.count() == sessions


def test_a_blocked_did_is_still_refused_as_blocked_whatever_its_key(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    revoke(agent.did)
    VerifiedAgent.objects.filter(did=agent.did).update(blocked=True)
    response, _ = agent.begin()
    refused(response, "blocked")
    nlweb_refused(post(client, "/ask", {"query": {"text": QUESTION}}, **agent.headers), "blocked")
