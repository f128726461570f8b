"""A wrong method's 405 tells the agent which method to use, on every door, in that door's own error shape.

AHP's said ``Method GET is not allowed here; use POST.``; NLWeb's, IntentWeb's, the schema templates', MCP's and
ASP's said only ``Method "GET" not allowed.`` (the ``Allow`` header was right), so an agent built for upstream NLWeb's
``GET /ask?query=...`` read "not allowed" and nothing about what to send instead."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def nlweb(body: dict) -> tuple[str, str]:
    return body["error"]["code"], body["error"]["message"]


def intentweb(body: dict) -> tuple[str, str]:
    assert body["flow_type"] == "error"
    return body["status"], body["message"]


def mcp(body: dict) -> tuple[str, str]:
    assert body["jsonrpc"] == "2.0"
    return body["error"]["data"]["code"], body["error"]["message"]


def schema_templates(body: dict) -> tuple[str, str]:
    return body["error"]["code"], body["error"]["message"]


def ahp(body: dict) -> tuple[str, str]:
    assert body["status"] == "error"
    return body["code"], body["message"]


#: (path, a method it refuses, the protocol's (code, message) reader, its code, the methods that do its work)
DOORS = [
    ("/ask", "GET", nlweb, "METHOD_NOT_ALLOWED", "POST"),
    ("/ask/", "PUT", nlweb, "METHOD_NOT_ALLOWED", "POST"),
    ("/await", "GET", nlweb, "METHOD_NOT_ALLOWED", "POST"),
    ("/intent", "GET", intentweb, "method_not_allowed", "POST"),
    ("/mcp", "GET", mcp, "method_not_allowed", "POST"),
    ("/mcp", "DELETE", mcp, "method_not_allowed", "POST"),
    ("/schema-templates", "PUT", schema_templates, "method_not_allowed", "GET, HEAD, POST"),
    ("/schema-templates/check_inventory", "POST", schema_templates, "method_not_allowed", "GET, HEAD"),
    ("/agent/asp", "GET", ahp, "method_not_allowed", "POST"),
    ("/agent/converse", "GET", ahp, "method_not_allowed", "POST"),
]


@pytest.mark.parametrize(
    ("path", "method", "read", "code", "use"), DOORS, ids=[f"{door[1]} {door[0]}" for door in DOORS]
)
def test_a_wrong_methods_405_says_which_method_to_use(path, method, read, code, use):
    response = Client().generic(method, path, b"{}", content_type="application/json")
    assert response.status_code == 405, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert read(response.json()) == (code, f"Method {method} is not allowed here; use {use}.")
    # Allow still names every method the resource supports, OPTIONS included.
    allowed = [name.strip() for name in response["Allow"].split(",")]
    assert allowed == [*use.split(", "), "OPTIONS"]


def test_a_long_made_up_method_is_quoted_cut():
    response = Client().generic("X" * 500, "/ask", b"{}", content_type="application/json")
    assert response.status_code == 405
    message = response.json()["error"]["message"]
    assert message.endswith("is not allowed here; use POST.")
    assert len(message) < 200
