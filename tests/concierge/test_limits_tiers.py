"""A verified agent's requests are counted per DID under its trust tier's ``RATE_LIMITS`` entry, and its trust moves
with every request (``DID_TRUST_TIERS``). One count per DID, whatever its tier: a tier change mid-window applies
the new tier's limit to what the agent has already sent, instead of starting a new count beside the old one."""

from __future__ import annotations

import pytest

from agent_handshake.models import VerifiedAgent
from tests.concierge.test_limits import UNKNOWN, configure
from tests.identity.test_verified_agents import TIERS, Agent, post

pytestmark = pytest.mark.django_db


def test_a_tier_change_keeps_the_agents_count(client, settings):
    """Demoted after using the trusted tier's four requests of the hour, an agent had the new tier's two on top
    (six, more than either tier allows); promoted after using the new tier's two, it had the trusted tier's four on
    top. (An hour: no window ends between these requests.)"""
    limits = {"unauthenticated": {"requests": "2/hour"}, "authenticated": {"requests": "4/hour"}}
    configure(settings, DID_TRUST_TIERS=TIERS, RATE_LIMITS=limits)

    def send(agent):
        return post(client, "/agent/converse", UNKNOWN, **agent.headers)

    def move(agent, trust):  # as an operator does in the admin; pinned, its requests do not move it
        VerifiedAgent.objects.filter(did=agent.did).update(trust=trust, pinned=True)

    demoted = Agent(client)
    demoted.handshake()
    move(demoted, 0.9)
    sent = [send(demoted) for _ in range(4)]
    assert [(r.status_code, r["X-RateLimit-Limit"]) for r in sent] == [(400, "4")] * 4
    move(demoted, 0.1)
    refused = send(demoted)  # its fifth this hour: over the new tier's two
    assert (refused.status_code, refused["X-RateLimit-Limit"], refused["X-RateLimit-Remaining"]) == (429, "2", "0")

    promoted = Agent(client)
    client.defaults["REMOTE_ADDR"] = "192.0.2.2"  # the handshake is anonymous: the first one spent this network's two
    promoted.handshake()
    move(promoted, 0.1)
    assert [send(promoted).status_code for _ in range(3)] == [400, 400, 429]
    move(promoted, 0.9)
    after = [send(promoted) for _ in range(2)]  # its fourth and fifth: the trusted tier's four, then over
    assert [(r.status_code, r["X-RateLimit-Remaining"]) for r in after] == [(400, "0"), (429, "0")]
