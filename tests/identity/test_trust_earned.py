"""A verified agent earns trust (+0.05) only for a request the site did work for: a question answered, a capability
called, a tool called, a page read, an intent answered. Protocol housekeeping that does nothing for anyone (MCP's
``initialize``, ``ping``, ``server/discover``, the listings, a notification, the ``job_status`` tool that reads how a
job stands) moves no trust when accepted, so ten pings no longer take a new DID to the top tier; refused, it still
lowers trust (-0.02), as any refusal does.
"""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import Job, TrustEvent, VerifiedAgent
from tests.asp.test_asp import Agent as ProtoAgent
from tests.asp.test_asp import frame, unframe
from tests.asp.test_asp import post as post_frame
from tests.identity.test_verified_agents import Agent, post
from tests.intentweb.test_intentweb import Agent as IntentAgent
from tests.mcp.test_mcp import MODERN_META

pytestmark = pytest.mark.django_db

QUESTION = "How hot should the water be for gyokuro?"
PAGE = "http://testserver/llms.txt"
EARNED = 0.05


def trust_of(did: str) -> float:
    return VerifiedAgent.objects.get(did=did).trust


def rpc(method: str, params: dict | None = None, id: int | None = 1) -> dict:
    body = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
    return body if id is None else {**body, "id": id}


def mcp(client, agent, body, **headers):
    return client.post("/mcp", json.dumps(body), content_type="application/json", **agent.headers, **headers)


INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
DISCOVER = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "server/discover"}
HOUSEKEEPING = [
    (rpc("initialize", INITIALIZE), {}),
    (rpc("ping"), {}),
    (rpc("tools/list"), {}),
    (rpc("resources/list"), {}),
    (rpc("resources/templates/list"), {}),
    (rpc("server/discover", {"_meta": MODERN_META}), DISCOVER),
    (rpc("notifications/initialized", id=None), {}),
]


@pytest.fixture
def agent(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    return agent


def test_mcp_housekeeping_accepted_moves_no_trust(client, agent):
    for body, headers in HOUSEKEEPING:
        response = mcp(client, agent, body, **headers)
        assert response.status_code in (200, 202), (body, response.content[:300])
        assert not response.content or "result" in response.json(), (body, response.json())
        assert trust_of(agent.did) == pytest.approx(0.5), body
    assert not TrustEvent.objects.filter(agent__did=agent.did).exists()
    # Ten pings leave a new DID where it started: its tier is not earned by them.
    for number in range(10):
        assert "result" in mcp(client, agent, rpc("ping", id=number)).json()
    assert trust_of(agent.did) == pytest.approx(0.5)
    # A batch of housekeeping is housekeeping; one that also calls a tool earns once (a batch is one request).
    assert mcp(client, agent, [rpc("ping", id=1), rpc("tools/list", id=2)]).status_code == 200
    assert trust_of(agent.did) == pytest.approx(0.5)
    call = rpc("tools/call", {"name": "content_search", "arguments": {"query": QUESTION}}, id=3)
    assert mcp(client, agent, [rpc("ping", id=1), call]).status_code == 200
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)


def test_mcp_housekeeping_refused_still_lowers_trust(client, agent):
    response = mcp(client, agent, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "not an object"})
    assert "error" in response.json(), response.json()
    assert trust_of(agent.did) == pytest.approx(0.48)
    reason = TrustEvent.objects.get(agent__did=agent.did).reason
    assert reason.startswith("POST /mcp"), reason


def test_mcp_work_earns_trust(client, agent):
    call = rpc("tools/call", {"name": "content_search", "arguments": {"query": QUESTION}})
    read = rpc("resources/read", {"uri": PAGE})
    for body in (call, read):
        before = trust_of(agent.did)
        answer = mcp(client, agent, body).json()
        assert "result" in answer, answer
        assert not answer["result"].get("isError"), answer
        assert trust_of(agent.did) == pytest.approx(before + EARNED), body


def test_the_job_status_tool_moves_no_trust_the_call_that_started_the_job_earned(client, every_scope_agent):
    agent = every_scope_agent
    escalate = {"name": "escalate_to_human", "arguments": {"query": "Can you blend a smoky oolong?"}}
    started = mcp(client, agent, rpc("tools/call", escalate)).json()
    assert started["result"]["isError"] is False, started
    job_id = str(Job.objects.get(api_key__verified_agent__did=agent.did).pk)
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED), started
    for number in range(3):
        poll = {"name": "job_status", "arguments": {"job_id": job_id}}
        status = mcp(client, agent, rpc("tools/call", poll, id=number)).json()
        assert not status["result"].get("isError"), status
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)
    # Asking for a job that is not there is refused, and lowers trust as any refusal does.
    unknown = mcp(client, agent, rpc("tools/call", {"name": "job_status", "arguments": {"job_id": "no-such"}}))
    assert unknown.json()["result"]["isError"] is True
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED - 0.02)


def test_every_door_that_does_work_for_a_verified_agent_earns_it_trust(client, agent):
    """The doors' work: AHP's converse and capability call, NLWeb's /ask, IntentWeb's intent, ASP's signed intent."""
    converse = {"ahp": "0.1", "capability": "content_search", "query": QUESTION}
    requests = [
        lambda: post(client, "/agent/converse", converse, **agent.headers),
        lambda: post(client, "/capabilities/content_search", {"query": QUESTION}, **agent.headers),
        lambda: post(client, "/ask", {"query": {"text": QUESTION}}, **agent.headers),
    ]
    for send in requests:
        before = trust_of(agent.did)
        response = send()
        assert response.status_code == 200, response.content[:300]
        assert trust_of(agent.did) == pytest.approx(before + EARNED), response.request["PATH_INFO"]
    before = trust_of(agent.did)
    status, reply = IntentAgent(client).send("intent_request", "Is LK-TEA-0001 in stock?", headers=agent.headers)
    assert status == 200, reply
    assert trust_of(agent.did) == pytest.approx(before + EARNED)
    proto = ProtoAgent(client)
    proto.handshake()
    answer = unframe(post_frame(client, frame(proto.intent(QUESTION, capabilities=["content_search"]))).content)
    assert answer.accepted
    assert trust_of(proto.did) == pytest.approx(0.5 + EARNED)
