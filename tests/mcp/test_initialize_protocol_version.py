"""MCP ``initialize`` must name the revision the client speaks: every revision's schema has
``InitializeRequest.params.protocolVersion`` as a required string. One without it, or with a number, null or a list,
was answered as if it had asked for our newest revision (2025-11-25); it is now JSON-RPC's invalid params (-32602),
with nothing negotiated, as the schema says."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

CLIENT = {"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


def initialize(client, params, **headers):
    body = {"jsonrpc": "2.0", "id": 7, "method": "initialize"}
    if params is not None:
        body["params"] = params
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, response.json()


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        CLIENT,
        {**CLIENT, "protocolVersion": None},
        {**CLIENT, "protocolVersion": 20250618},
        {**CLIENT, "protocolVersion": ["2025-06-18"]},
        {**CLIENT, "protocolVersion": {"version": "2025-06-18"}},
    ],
    ids=["no params", "empty params", "no protocolVersion", "null", "number", "list", "object"],
)
def test_an_initialize_without_a_string_protocol_version_is_invalid_params(client, params):
    response, body = initialize(client, params)
    assert 400 <= response.status_code < 500, body
    assert response["Content-Type"] == "application/json"
    assert "result" not in body
    assert body["id"] == 7
    assert body["error"]["code"] == -32602
    assert "protocolVersion" in body["error"]["message"]


def test_the_header_does_not_stand_in_for_the_body(client):
    """The ``MCP-Protocol-Version`` header repeats the negotiated revision on later requests; initialize's body is
    where the client proposes it, and the schema requires it there."""
    response, body = initialize(client, CLIENT, HTTP_MCP_PROTOCOL_VERSION="2025-06-18")
    assert 400 <= response.status_code < 500, body
    assert body["error"]["code"] == -32602


@pytest.mark.parametrize(("asked", "answered"), [("2025-06-18", "2025-06-18"), ("2030-01-01", "2025-11-25")])
def test_a_string_protocol_version_is_negotiated_as_before(client, asked, answered):
    response, body = initialize(client, {**CLIENT, "protocolVersion": asked})
    assert response.status_code == 200, body
    assert body["result"]["protocolVersion"] == answered
