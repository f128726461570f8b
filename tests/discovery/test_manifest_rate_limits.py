"""The rate limits the manifest publishes are the ones enforced, whatever ``RATE_LIMITS`` leaves out: a tier with no
``requests`` (or none at all) is still limited, by its default, so that default is what an agent must be told."""

from __future__ import annotations

import pytest

from agent_handshake.models import AgentClient, ApiKey
from tests.ahp_schema import assert_valid_manifest

pytestmark = pytest.mark.django_db

PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def enforced(response) -> str:
    """The limit a response says it was counted against, in the manifest's "N/period" form."""
    seconds = int(response["X-RateLimit-Window"])
    period = next(name for name, length in PERIODS.items() if length == seconds)
    return f"{response['X-RateLimit-Limit']}/{period}"


def ask(client, **headers):
    body = {"capability": "content_search", "query": "teapots", "context": {"requesting_agent": "limits-test/1.0"}}
    return client.post("/agent/converse", body, content_type="application/json", headers=headers)


@pytest.mark.parametrize(
    "rate_limits",
    [
        {"unauthenticated": {"token_budget": "100/session"}},  # a tier without requests
        {"authenticated": {"requests": "50/hour"}},  # the other tier missing
        {},
    ],
    ids=["no-requests", "one-tier", "none"],
)
def test_the_published_limits_are_the_enforced_ones(client, settings, ahp_schemas, rate_limits):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "RATE_LIMITS": rate_limits}
    manifest = client.get("/.well-known/agent.json").json()
    assert_valid_manifest(manifest, ahp_schemas)
    anonymous = enforced(ask(client))
    _, secret = ApiKey.objects.issue(AgentClient.objects.create(name="Limits test"))
    keyed = enforced(ask(client, authorization=f"Bearer {secret}"))
    assert manifest["rate_limit"] == anonymous
    assert manifest["rate_limits"]["unauthenticated"]["requests"] == anonymous
    assert manifest["rate_limits"]["authenticated"]["requests"] == keyed
    # What the site sets besides is kept as it was set.
    for tier, given in rate_limits.items():
        assert {**manifest["rate_limits"][tier], **given} == manifest["rate_limits"][tier]
