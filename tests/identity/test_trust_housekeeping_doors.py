"""Housekeeping earns a verified agent no trust on the doors besides MCP either (tests/identity/test_trust_earned.py):
AHP's job status poll, NLWeb's /await, the schema templates' listing and a template read, accepted, move no trust;
refused, they lower it (-0.02); the request that started the job earned +0.05."""

from __future__ import annotations

import pytest

from agent_handshake.models import Job, VerifiedAgent
from tests.identity.test_verified_agents import post

pytestmark = pytest.mark.django_db

EARNED, REFUSED = 0.05, -0.02


def trust_of(did: str) -> float:
    return VerifiedAgent.objects.get(did=did).trust


def test_polls_and_listings_move_no_trust_on_any_door(client, every_scope_agent):
    agent = every_scope_agent
    question = {"ahp": "0.1", "capability": "escalate_to_human", "query": "Can you blend a smoky oolong?"}
    started = post(client, "/agent/converse", question, **agent.headers)
    assert started.status_code == 202, started.json()
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)  # the work
    job = Job.objects.get(api_key__verified_agent__did=agent.did)
    scenario = client.get("/schema-templates", **agent.headers).json()["scenarios"][0]["scenario"]
    housekeeping = [
        lambda: client.get(started.json()["poll"], **agent.headers),
        lambda: client.head(started.json()["poll"], **agent.headers),
        lambda: post(client, "/await", {"promise_token": job.pk, "action": "checkin"}, **agent.headers),
        lambda: client.get("/schema-templates", **agent.headers),
        lambda: client.head("/schema-templates", **agent.headers),
        lambda: client.get(f"/schema-templates/{scenario}", **agent.headers),
    ]
    for send in housekeeping * 3:
        response = send()
        assert response.status_code < 300, (response.request["PATH_INFO"], response.content[:300])
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED)
    # Refused, housekeeping lowers trust as any refusal does.
    assert client.get("/agent/converse/status/no-such-job", **agent.headers).status_code == 404
    assert trust_of(agent.did) == pytest.approx(0.5 + EARNED + REFUSED)
