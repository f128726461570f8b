"""MCP at ``POST /mcp`` measured against the MCP specification's text (basic/lifecycle, basic/transports and the
schema of each revision we speak): each test failed before its fix. Raw JSON-RPC over the Django test client, as
in tests/test_mcp.py."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
}


def post(client, body, **headers):
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, (response.json() if response.content else None)


# --- lifecycle ----------------------------------------------------------------------------------------------------


def test_initialize_in_a_batch_is_an_invalid_request(client):
    """2025-03-26 (the revision with batches), basic/lifecycle: "The initialize request MUST NOT be part of a
    JSON-RPC batch". It was answered with an InitializeResult, as if the handshake had happened; the batch is now
    refused whole, as the batches we cannot answer are (400, -32600), with nothing in it run."""
    for batch in ([INITIALIZE], [INITIALIZE, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]):
        response, body = post(client, batch)
        assert response.status_code == 400, body
        assert body["error"]["code"] == -32600
        assert "initialize" in body["error"]["message"]
        assert body["id"] is None
    # On its own, it is the handshake.
    response, body = post(client, INITIALIZE)
    assert response.status_code == 200
    assert body["result"]["protocolVersion"] == "2025-03-26"
