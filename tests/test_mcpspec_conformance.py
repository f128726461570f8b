"""MCP at ``POST /mcp`` measured against the text of the MCP revisions it claims (agent_handshake/mcp/versions.py):
pagination, the JSON Schema dialect of the tools' schemas and the ``MCP-Protocol-Version`` header. Each test quotes
the sentence it holds the server to and failed before its fix. Raw JSON-RPC over the Django test client, as in
tests/test_mcp.py and tests/test_mcp_spec.py."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "spec-client", "version": "1"},
}


def post(client, body, **headers):
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, (response.json() if response.content else None)


def rpc(client, method, params=None, *, version=None):
    """One request as a client of ``version`` sends it: a handshake revision's header, or 2026-07-28's envelope."""
    params = dict(params or {})
    headers = {}
    if version == "2026-07-28":
        params["_meta"] = MODERN_META
        headers = {"HTTP_MCP_PROTOCOL_VERSION": version, "HTTP_MCP_METHOD": method}
        if method == "tools/call":
            headers["HTTP_MCP_NAME"] = params["name"]
    elif version:
        headers["HTTP_MCP_PROTOCOL_VERSION"] = version
    return post(client, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, **headers)


# --- pagination -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tools/list", "resources/templates/list"])
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_an_invalid_cursor_on_every_paginated_list_is_invalid_params(client, method, version):
    """server/utilities/pagination, Error Handling: "Invalid cursors SHOULD result in an error with code -32602
    (Invalid params)", and tools/list and resources/templates/list are among the "MCP operations [that] support
    pagination". We give no cursor for either list, so any cursor is not one of ours; both answered the whole
    list as if none had been sent (resources/list already refused one)."""
    response, body = rpc(client, method, {"cursor": "not-a-cursor-of-ours"}, version=version)
    assert body["error"]["code"] == -32602, body
    assert "cursor" in body["error"]["message"]
    assert response.status_code == (400 if version == "2026-07-28" else 200)
    # Without a cursor (or with a null one) the list is served as before.
    for params in ({}, {"cursor": None}):
        response, body = rpc(client, method, params, version=version)
        assert response.status_code == 200
        assert "result" in body, body
