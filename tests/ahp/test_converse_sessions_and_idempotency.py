"""AHP MODE2/MODE3 on POST /agent/converse: sessions, idempotency, limits and the published schemas, through the Django
test client against real PostgreSQL."""

from __future__ import annotations

import datetime
import json

import pytest
from django.utils import timezone

import agent_handshake
from agent_handshake.models import AgentClient, ApiKey, ConverseSession, IdempotencyRecord, Job
from demo_site.shop.models import Appointment
from tests.ahp.test_mode3 import booking, next_open_day

pytestmark = pytest.mark.django_db
URL = "/agent/converse"


def issue(name="Test agent", scopes=("*",)):
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=list(scopes))[1]


def post(client, body, ip="192.0.2.1", **headers):
    return client.post(URL, json.dumps(body), content_type="application/json", headers=headers, REMOTE_ADDR=ip)


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def cancel_order(registries):
    """An async capability with two required fields, the second of which a query seldom states."""

    @agent_handshake.capability(
        description="Cancel an order, given its number and the email address it was placed with.",
        action_type="async",
        input_schema={
            "type": "object",
            "required": ["order_number", "email"],
            "properties": {
                "order_number": {"type": "string", "pattern": "^LK-\\d{5}$"},
                "email": {"type": "string", "format": "email"},
            },
        },
        output_schema={"type": "object"},
    )
    def cancel_order(invocation):
        return {}

    return "cancel_order"


def test_an_async_call_that_completes_a_clarification_closes_it_and_is_a_turn(client, settings, cancel_order):
    """The answer that completes an async capability's input starts its job and closes the question, as a query or
    an action's does: the same answer sent again (a retry, an agent repeating its last message) is not a second
    job from the stored input, and the session's async calls are turns that SESSION_MAX_TURNS bounds."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "SESSION_MAX_TURNS": 2}
    auth = bearer(issue())
    asked = post(client, {"capability": cancel_order, "query": "Cancel order LK-10001"}, **auth).json()
    assert asked["status"] == "clarification_needed", asked
    session_id = asked["session_id"]
    answer = {"capability": cancel_order, "query": "Cancel order LK-10001", "session_id": session_id}
    answer["clarification"] = "ada@example.com"
    accepted = post(client, answer, **auth)
    assert accepted.status_code == 202, accepted.json()
    session = ConverseSession.objects.get(pk=session_id)
    assert session.pending_clarification is None
    assert len(session.turns) == 1

    repeated = post(client, answer, **auth)
    assert repeated.json()["status"] == "clarification_needed", repeated.json()  # asked afresh: nothing stored
    assert Job.objects.count() == 1

    structured = {"capability": cancel_order, "query": "Cancel", "session_id": session_id}
    structured["context"] = {"input": {"order_number": "LK-10002", "email": "ada@example.com"}}
    assert post(client, structured, **auth).status_code == 202  # the second turn
    refused = post(client, structured, **auth)
    assert refused.status_code == 429, refused.json()
    assert refused.json()["scope"] == "session"
    assert Job.objects.count() == 2


def test_an_idempotency_key_is_fresh_again_after_idempotency_ttl(client, settings):
    """Records are kept IDEMPOTENCY_TTL: a key sent again after that starts a new request (an agent whose keys are
    derived from what it does repeats them), instead of a 422 for the old body or a replay of a stale response,
    whether or not the cleanup has deleted the old record yet."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "IDEMPOTENCY_TTL": 3600}
    headers = {**bearer(issue()), "Idempotency-Key": "weekly-tasting"}
    first = post(client, booking(*next_open_day(11)), **headers)
    assert first.status_code == 200, first.json()
    IdempotencyRecord.objects.update(created_at=timezone.now() - datetime.timedelta(seconds=3601))

    later = post(client, booking(*next_open_day(14)), **headers)
    assert later.status_code == 200, later.json()
    assert "Idempotent-Replayed" not in later.headers
    assert Appointment.objects.count() == 2
    again = post(client, booking(*next_open_day(14)), **headers)
    assert (again.json(), again.headers["Idempotent-Replayed"]) == (later.json(), "true")
    assert Appointment.objects.count() == 2


def test_a_request_without_capability_on_a_site_with_none_is_unknown_capability(client, registries, ahp_schemas):
    """With no converse capability (a MODE1 site: nothing registered), routing has nothing to offer: the answer is
    the 400 unknown_capability a named capability gets, not a clarification with no options whose every answer
    asks again in a new session."""
    from tests.ahp.test_converse import response_validator

    _, capabilities = registries
    capabilities._capabilities.clear()
    for body in ({"query": "What do you sell?"}, {"query": "What do you sell?", "capability": "content_search"}):
        response = post(client, body)
        assert response.status_code == 400, response.json()
        assert (response.json()["code"], response.json()["available_capabilities"]) == ("unknown_capability", [])
        response_validator(ahp_schemas).validate(response.json())
    assert not ConverseSession.objects.exists()
