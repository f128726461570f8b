"""A verified agent's trust moves with what MCP did with its request, as on every other front door: up for a request
the site accepted, down for one it refused (identity/trust.py: "any 4xx: a malformed request, a scope it lacks").
MCP answers a refused tool call (``isError``) and most JSON-RPC errors with HTTP 200, which the front door read as
accepted: an agent refused a tool for want of its tier's scope climbed into that tier by being refused."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import VerifiedAgent
from demo_site.shop.models import Appointment
from tests.identity.test_verified_agents import TIERS, Agent
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


def rpc(client, agent, method, params=None, id=1, **headers):
    body = {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params is not None else {})}
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **agent.headers, **headers)
    return response, response.json() if response.content else None


def trust_of(agent):
    return VerifiedAgent.objects.get(did=agent.did).trust


@pytest.fixture
def agent(client, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DID_TRUST_TIERS": TIERS}
    agent = Agent(client)
    assert agent.handshake()["tier"] == "new"  # no book_appointment scope until 0.6
    return agent


def test_a_refused_tool_call_lowers_trust_and_never_earns_the_scope_it_lacked(client, demo_content, agent):
    booking = tasting_booking()
    before = trust_of(agent)
    for attempt in range(4):
        params = {"name": "book_appointment", "arguments": booking}
        response, body = rpc(client, agent, "tools/call", params, id=attempt)
        assert response.status_code == 200
        assert body["result"]["isError"] is True, body
        assert body["result"]["_meta"]["code"] == "forbidden"
        assert trust_of(agent) < before, (attempt, trust_of(agent))
        before = trust_of(agent)
    assert not Appointment.objects.exists()


def test_json_rpc_errors_and_invalid_tool_input_lower_trust(client, demo_content, agent):
    cases = [
        ("no/such", None),  # -32601, 200 on the handshake revisions
        ("tools/call", {"name": "no_such_tool"}),  # -32602
        ("resources/read", {"uri": "http://testserver/no/such/page/"}),  # -32002
        ("tools/call", {"name": "content_search", "arguments": {"query": 5}}),  # isError, invalid input
    ]
    for method, params in cases:
        before = trust_of(agent)
        response, body = rpc(client, agent, method, params)
        assert response.status_code == 200, body
        assert "error" in body or body["result"]["isError"] is True, body
        assert trust_of(agent) < before, (method, params)


def test_an_accepted_request_still_raises_trust(client, demo_content, agent):
    question = {"name": "content_search", "arguments": {"query": "sencha"}}
    # Requests the site does work for (housekeeping such as ping earns nothing: tests/identity/test_trust_earned.py).
    for method, params in [("resources/read", {"uri": "http://testserver/llms.txt"}), ("tools/call", question)]:
        before = trust_of(agent)
        response, body = rpc(client, agent, method, params)
        assert response.status_code == 200
        assert "result" in body, body
        assert not body["result"].get("isError"), body
        assert trust_of(agent) > before, method
    # A batch holding a refusal is refused as a whole; one of accepted requests is accepted.
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": question},
             {"jsonrpc": "2.0", "id": 2, "method": "no/such"}]  # fmt: skip
    for messages, moves_up in ((batch, False), (batch[:1], True)):
        before = trust_of(agent)
        response = client.post("/mcp", json.dumps(messages), content_type="application/json", **agent.headers)
        assert response.status_code == 200
        assert (trust_of(agent) > before) is moves_up, messages


def test_the_sites_own_failure_in_a_tool_call_moves_no_trust(client, demo_content, agent):
    """A tool call the site could not serve (search down: the stored vectors are another model's until the index is
    rebuilt) is its own failure, a 503 on AHP, which moves no trust (tests/identity/test_verified_agents.py); MCP
    answers it with 200 and ``isError``, which raised the agent's trust as if the site had served it."""
    from agent_handshake.models import EmbeddingIndex, TrustEvent

    EmbeddingIndex.objects.update(model_id="another-model")
    before = trust_of(agent)
    events = TrustEvent.objects.count()
    question = {"name": "content_search", "arguments": {"query": "How hot should the water be for gyokuro?"}}
    response, body = rpc(client, agent, "tools/call", question)
    assert response.status_code == 200
    assert body["result"]["isError"] is True, body
    assert body["result"]["_meta"]["code"] == "unavailable"
    assert trust_of(agent) == before
    assert TrustEvent.objects.count() == events
    # In a batch with an accepted request, the failure keeps the batch from counting either way.
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": question}]  # fmt: skip
    response = client.post("/mcp", json.dumps(batch), content_type="application/json", **agent.headers)
    assert response.status_code == 200
    assert trust_of(agent) == before
