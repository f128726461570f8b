"""An idempotent retry of an MCP ``tools/call`` gets the stored answer, as it was first rendered: for the revision of
the first call. A client whose first try spoke 2025-03-26 (no MCP-Protocol-Version header) and whose retry speaks
2025-06-18 got no ``structuredContent``, though ``tools/list`` declares the tool's ``outputSchema`` for that revision
(2025-06-18, tools: a server that declares an outputSchema MUST give structured results that conform to it); the
other way round it got a member its revision does not have. The replay is now rendered for the asking revision."""

from __future__ import annotations

import json

import jsonschema
import pytest

from demo_site.shop.models import Appointment
from tests.mcp.test_mcp import call, key, rpc, tasting_booking

pytestmark = pytest.mark.django_db


def output_schema(client, name: str, version: str) -> dict:
    _, listing = rpc(client, "tools/list", {}, version=version)
    return next(tool for tool in listing["result"]["tools"] if tool["name"] == name)["outputSchema"]


def test_a_replay_for_a_later_revision_has_the_structured_content_it_declares(client, demo_content):
    secret = key()
    booking = tasting_booking()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}", "HTTP_IDEMPOTENCY_KEY": "book-revisions"}
    _, first = call(client, "book_appointment", booking, **headers)  # no header: 2025-03-26
    assert first["result"]["isError"] is False, first
    assert "structuredContent" not in first["result"]
    response, again = call(client, "book_appointment", booking, version="2025-06-18", **headers)
    assert response["Idempotent-Replayed"] == "true"
    assert Appointment.objects.count() == 1
    result = again["result"]
    assert result["content"] == first["result"]["content"]
    assert result["structuredContent"] == json.loads(result["content"][1]["text"])
    jsonschema.validate(result["structuredContent"], output_schema(client, "book_appointment", "2025-06-18"))
    assert result["structuredContent"]["reference"] == Appointment.objects.get().reference


def test_a_replay_for_an_earlier_revision_has_no_structured_content(client, demo_content):
    secret = key()
    booking = tasting_booking()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}", "HTTP_IDEMPOTENCY_KEY": "book-back"}
    _, first = call(client, "book_appointment", booking, version="2025-06-18", **headers)
    assert "structuredContent" in first["result"]
    response, again = call(client, "book_appointment", booking, version="2024-11-05", **headers)
    assert response["Idempotent-Replayed"] == "true"
    assert "structuredContent" not in again["result"]
    assert again["result"]["content"] == first["result"]["content"]
    # ... and the same revision still gets exactly the first answer.
    _, same = call(client, "book_appointment", booking, version="2025-06-18", **headers)
    assert same == first
