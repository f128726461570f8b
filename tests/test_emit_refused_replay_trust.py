"""An idempotent replay of a refused request (the stored refusal answered again, ``Idempotent-Replayed: true``) is an
honest network retry of a request already judged: it moves a verified agent's trust no more than an accepted replay
does. Before, every replayed refusal lowered trust by 0.02 again, on every door that takes an Idempotency-Key."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from agent_handshake.models import TrustEvent
from tests.test_intentweb import Agent as IntentAgent
from tests.test_trustjobs_replays import DOORS, TIERS, trust_of
from tests.test_verified_agents import Agent, post

pytestmark = pytest.mark.django_db

REFUSED = -0.02


@pytest.fixture
def agent(client, demo_content, settings):
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "DID_TRUST_TIERS": TIERS}):
        agent = Agent(client)
        agent.handshake()
        yield agent


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
