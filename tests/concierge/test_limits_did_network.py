"""Verified agents' identities are self-issued: a new key pair is a new DID, counted on its own. Without a ceiling
on what one network's DIDs ask together, a client could make a DID per handshake and multiply its requests past
the anonymous per-IP limit (each handshake costs it two anonymous requests, each DID gets a tier's limit)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.identity.test_verified_agents import Agent, converse

pytestmark = pytest.mark.django_db

LIMITS = {"unauthenticated": {"requests": "30/minute"}, "authenticated": {"requests": "50/minute"}}


def configured(settings, **extra):
    return override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "RATE_LIMITS": LIMITS, **extra})


def test_one_networks_verified_agents_share_a_ceiling(client, demo_content, settings):
    with configured(settings, DID_NETWORK_RATE_LIMIT="5/minute"):
        agents = [Agent(client) for _ in range(3)]
        for agent in agents:
            agent.handshake()
        answered = [converse(client, agent).status_code for agent in agents for _ in range(2)]
        assert answered == [200] * 5 + [429], answered
        refused = converse(client, agents[0])
        assert refused.status_code == 429
        body = refused.json()
        assert body["scope"] == "ip"
        assert refused["X-RateLimit-Limit"] == "5"
        assert int(refused["Retry-After"]) >= 1
        # Another network's agent is not held to this one's ceiling.
        other = Agent(client)
        other.handshake()
        elsewhere = client.post(
            "/agent/converse",
            '{"capability": "content_search", "query": "What is gyokuro?"}',
            content_type="application/json",
            REMOTE_ADDR="203.0.113.9",
            **other.headers,
        )
        assert elsewhere.status_code == 200, elsewhere.json()


def test_by_default_the_ceiling_is_the_authenticated_tiers_limit(client, demo_content, settings):
    limits = {**LIMITS, "authenticated": {"requests": "4/minute"}}
    with configured(settings, RATE_LIMITS=limits):
        agents = [Agent(client) for _ in range(3)]
        for agent in agents:
            agent.handshake()
        answered = [converse(client, agent).status_code for agent in agents for _ in range(2)]
        assert answered == [200] * 4 + [429] * 2, answered  # one authenticated agent's 4, shared


def test_the_ceiling_can_be_lifted(client, demo_content, settings):
    with configured(settings, DID_NETWORK_RATE_LIMIT=None, RATE_LIMITS={**LIMITS,
                    "authenticated": {"requests": "2/minute"}}):  # fmt: skip
        agents = [Agent(client) for _ in range(3)]
        for agent in agents:
            agent.handshake()
        answered = [converse(client, agent).status_code for agent in agents for _ in range(2)]
        assert answered == [200] * 6, answered  # each DID its own 2; no shared ceiling
