"""An idempotent replay (the same Idempotency-Key sent again, answered from the stored response) does no new work:
it moves a verified agent's trust on no door that takes an Idempotency-Key (AHP's converse and capability call,
NLWeb's /ask, IntentWeb, the schema templates, MCP). An accepted request replayed earns nothing again (otherwise one
request sent again and again would raise the agent's tier), and a refused one replayed (the stored refusal answered
again, ``Idempotent-Replayed: true``) is an honest network retry of a request already judged: it lowers trust once."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import TrustEvent, VerifiedAgent
from tests.identity.test_verified_agents import post
from tests.intentweb.test_intentweb import Agent as IntentAgent

pytestmark = pytest.mark.django_db

EARNED, REFUSED = 0.05, -0.02
INPUT = {"product": "LK-TEA-0001"}


def trust_of(did: str) -> float:
    return VerifiedAgent.objects.get(did=did).trust


def mcp_call(arguments: dict) -> dict:
    params = {"name": "check_inventory", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


DOORS = {
    "ahp": lambda: ("/agent/converse", {"capability": "check_inventory", "query": "LK", "context": {"input": INPUT}}),
    "openapi": lambda: ("/capabilities/check_inventory", {"query": "Stock?", **INPUT}),
    "nlweb": lambda: ("/ask", {"query": {"text": "Stock?", "capability": "check_inventory", "input": INPUT}}),
    "schema_templates": lambda: ("/schema-templates", {"schema_id": "check_inventory_v1", "payload": INPUT}),
    "mcp": lambda: ("/mcp", mcp_call(INPUT)),
}


@pytest.fixture
def agent(every_scope_agent):
    return every_scope_agent


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_replay_earns_no_trust(client, agent, door):
    path, body = DOORS[door]()
    headers = {**agent.headers, "HTTP_IDEMPOTENCY_KEY": f"replay-{door}"}
    first = post(client, path, body, **headers)
    assert first.status_code == 200, first.content[:400]
    assert "Idempotent-Replayed" not in first.headers
    if door == "mcp":
        assert first.json()["result"]["isError"] is False, first.json()
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)  # the work, once
    for _ in range(5):
        again = post(client, path, body, **headers)
        assert again.status_code == 200, again.content[:400]
        assert again.headers.get("Idempotent-Replayed") == "true"
        assert again.json() == first.json()
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED), "a replay earned trust"
    assert TrustEvent.objects.filter(agent__did=agent.did).count() == 1
    # The key reused for another request is refused (422): a refusal still lowers trust.
    other = DOORS[door]()[1]
    other = json.loads(json.dumps(other).replace("LK-TEA-0001", "LK-TEA-0002"))
    refused = post(client, path, other, **headers)
    if door == "mcp":
        assert refused.json()["result"]["isError"] is True, refused.json()
    else:
        assert refused.status_code == 422, refused.content[:400]
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED + REFUSED)
    # A new key is a new request: it earns again.
    fresh = post(client, path, body, **{**agent.headers, "HTTP_IDEMPOTENCY_KEY": f"fresh-{door}"})
    assert fresh.status_code == 200
    assert "Idempotent-Replayed" not in fresh.headers
    assert trust_of(agent.did) == pytest.approx(0.5 + 2 * EARNED + REFUSED)


def test_an_intentweb_replay_earns_no_trust(client, agent):
    headers = {**agent.headers, "HTTP_IDEMPOTENCY_KEY": "replay-intent"}
    intent = IntentAgent(client)
    status, first = intent.send("intent_request", "Is LK-TEA-0001 in stock?", headers=headers)
    assert status == 200, first
    assert first["flow_type"] == "execution_result", first
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)
    for _ in range(3):
        retry = intent.envelope("intent_request", "Is LK-TEA-0001 in stock?")  # a new nonce and time
        again = client.post("/intent", json.dumps(retry), content_type="application/json", **headers)
        assert again.status_code == 200, again.content[:400]
        assert again.headers.get("Idempotent-Replayed") == "true"
        assert again.json()["result"] == first["result"]
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED), "a replay earned trust"


def unknown_product(door: str) -> tuple[str, dict]:
    """The door's capability call for a product the shop does not have: the capability refuses it."""
    path, body = DOORS[door]()
    return path, json.loads(json.dumps(body).replace("LK-TEA-0001", "LK-NONE-9999"))


def refused(door: str, response) -> bool:
    if door == "mcp":
        return response.status_code == 200 and response.json()["result"]["isError"] is True
    return 400 <= response.status_code < 500


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_replayed_refusal_lowers_trust_once(client, agent, door):
    path, body = unknown_product(door)
    headers = {**agent.headers, "HTTP_IDEMPOTENCY_KEY": f"refused-{door}"}
    first = post(client, path, body, **headers)
    assert refused(door, first), first.content[:400]
    assert "Idempotent-Replayed" not in first.headers
    assert trust_of(agent.did) == pytest.approx(0.5 + REFUSED)  # the refusal, once
    for _ in range(3):
        again = post(client, path, body, **headers)
        assert again.headers.get("Idempotent-Replayed") == "true", again.content[:400]
        assert again.status_code == first.status_code
        assert again.json() == first.json()
    assert trust_of(agent.did) == pytest.approx(0.5 + REFUSED), "a replayed refusal lowered trust again"
    assert TrustEvent.objects.filter(agent__did=agent.did).count() == 1
    # A new key is a new request: refused, it lowers trust again.
    fresh = post(client, path, body, **{**agent.headers, "HTTP_IDEMPOTENCY_KEY": f"fresh-{door}"})
    assert refused(door, fresh)
    assert "Idempotent-Replayed" not in fresh.headers
    assert trust_of(agent.did) == pytest.approx(0.5 + 2 * REFUSED)


def test_a_replayed_intentweb_refusal_lowers_trust_once(client, agent):
    headers = {**agent.headers, "HTTP_IDEMPOTENCY_KEY": "refused-intent"}
    intent = IntentAgent(client)
    product = {"collected_information": {"product": "LK-NONE-9999"}}
    status, first = intent.send("intent_request", "Is LK-NONE-9999 in stock?", headers=headers, **product)
    assert 400 <= status < 500 or first.get("flow_type") == "error", first
    moved = trust_of(agent.did)
    assert moved == pytest.approx(0.5 + REFUSED), first
    for _ in range(3):
        retry = intent.envelope("intent_request", "Is LK-NONE-9999 in stock?", **product)  # a new nonce and time
        again = client.post("/intent", json.dumps(retry), content_type="application/json", **headers)
        assert again.status_code == status, again.content[:400]
        assert again.headers.get("Idempotent-Replayed") == "true"
    assert trust_of(agent.did) == pytest.approx(moved), "a replayed refusal lowered trust again"
