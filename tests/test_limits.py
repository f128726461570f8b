"""Limits nobody can spoof (issue 9): who a request is counted as, whose sessions it may continue, the token
budgets of both tiers, the client address behind reverse proxies, and the session lock during slow answers."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from agent_handshake import checks
from agent_handshake.models import AgentClient, ApiKey

pytestmark = pytest.mark.django_db
URL = "/agent/converse"
# Counted like any request, then refused (400) before retrieval: what the request-count tests need.
UNKNOWN = {"ahp": "0.1", "capability": "no_such_capability", "query": "hello"}


def post(client, body, ip="192.0.2.1", **headers):
    return client.post(URL, json.dumps(body), content_type="application/json", headers=headers, REMOTE_ADDR=ip)


def issue(name="Test agent"):
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


def configure(settings, **values):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, **values}


# --- requesting_agent: a hint, never an identity ------------------------------------------------------------------


def test_a_requesting_agent_name_never_throttles_a_key_nor_another_sender(client, settings):
    configure(settings, AGENT_RATE_LIMIT="3/minute")
    named = {**UNKNOWN, "context": {"requesting_agent": "shared-bot"}}
    # Three senders use the name up to its limit...
    assert [post(client, named, ip=f"198.51.100.{n}").status_code for n in range(3)] == [400] * 3
    # ... a fourth sender naming it still has its own quota ...
    assert post(client, named, ip="198.51.100.99").status_code == 400
    # ... and a valid API key sending the name is counted by its key alone.
    keyed = post(client, named, ip="198.51.100.0", **bearer(issue()))
    assert keyed.status_code == 400
    assert keyed["X-RateLimit-Limit"] == "120"
    # One sender is still held to the name's limit (§11.3's "agent" scope).
    assert [post(client, named, ip="198.51.100.0").status_code for _ in range(3)] == [400, 400, 429]
    limited = post(client, named, ip="198.51.100.0")
    assert (limited.status_code, limited.json()["scope"]) == (429, "agent")
    assert post(client, {**UNKNOWN, "context": {"requesting_agent": "other-bot"}}, ip="198.51.100.0").status_code == 400


@pytest.mark.parametrize(
    "setting",
    [
        {"AGENT_RATE_LIMIT": "30 per minute"},
        {"AGENT_RATE_LIMIT": "30/week"},
        {"ACTION_RATE_LIMIT": "30/5m"},
        {"ACTION_RATE_LIMIT": 30},
        {"RATE_LIMITS": {"authenticated": {"requests": "120/minutes"}}},
    ],
)
def test_e002_client_address_and_rate_settings(setting):
    with override_settings(AGENT_HANDSHAKE=setting):
        messages = checks.check_settings()
    assert [message.id for message in messages] == ["agent_handshake.E002"], [m.msg for m in messages]
    assert messages[0].msg.startswith(f"AGENT_HANDSHAKE['{next(iter(setting))}']")


def test_manage_py_check_refuses_a_malformed_agent_rate_limit_that_requests_would_trip_on(client):
    with override_settings(AGENT_HANDSHAKE={"AGENT_RATE_LIMIT": "30 a minute"}), pytest.raises(SystemCheckError):
        call_command("check", stdout=StringIO(), stderr=StringIO())
    with override_settings(AGENT_HANDSHAKE={"AGENT_RATE_LIMIT": "", "ACTION_RATE_LIMIT": ""}):  # "": no limit
        call_command("check", stdout=StringIO())
        named = post(client, {**UNKNOWN, "context": {"requesting_agent": "bot"}})
    assert named.status_code == 400
