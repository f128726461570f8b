"""A refusal names what was wrong without growing with what was sent: many failing items, or many unknown keys,
come back as a bounded list (tests/concierge/test_validation_messages.py bounds each value and key)."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from agent_handshake.concierge.validation import MAX_PROBLEMS

pytestmark = pytest.mark.django_db

LARGE = {"AGENT_HANDSHAKE": {"MAX_REQUEST_BYTES": 1_000_000}}


@override_settings(**LARGE)
def test_an_ahp_request_with_thousands_of_wrong_items_gets_a_small_refusal(client):
    body = {"query": "tea", "context": {"accept_types": [1] * 20_000}}
    response = client.post("/agent/converse", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    refusal = response.json()
    assert refusal["code"] == "invalid_request"
    assert len(response.content) < 4_000, len(response.content)
    assert "context.accept_types" in refusal["message"]
    assert 1 <= len(refusal["fields"]) <= MAX_PROBLEMS


@override_settings(**LARGE)
def test_a_capability_operation_with_thousands_of_unknown_fields_gets_a_small_refusal(client):
    body = {f"field_{n}": n for n in range(5_000)}
    response = client.post("/capabilities/site_info", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    refusal = response.json()
    assert len(response.content) < 4_000, len(response.content)
    assert len(refusal["fields"]) == MAX_PROBLEMS
    assert "field_0" in refusal["message"]
    assert "and 4990 more" in refusal["message"]
