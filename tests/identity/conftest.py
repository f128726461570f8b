from __future__ import annotations

import pytest
from django.test import override_settings

#: One trust tier for every verified agent, with every scope: a new agent may call any capability, the desk too.
EVERY_SCOPE = [{"name": "all", "min_trust": 0.0, "rate_limits": "authenticated", "scopes": ["*"]}]


@pytest.fixture
def every_scope_agent(client, demo_content, settings):
    """A verified agent (a real handshake) of a site whose one trust tier gives every agent every scope, for the whole
    test."""
    from tests.identity.test_verified_agents import Agent

    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "DID_TRUST_TIERS": EVERY_SCOPE}):
        agent = Agent(client)
        agent.handshake()
        yield agent
