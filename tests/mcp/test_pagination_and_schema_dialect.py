"""MCP at ``POST /mcp`` measured against the text of the MCP revisions it claims (agent_handshake/mcp/versions.py):
pagination, the JSON Schema dialect of the tools' schemas and the ``MCP-Protocol-Version`` header. Each test quotes the
sentence it holds the server to. Raw JSON-RPC over the Django test client, as in tests/mcp/test_mcp.py and
tests/mcp/test_lifecycle_and_transports.py."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from agent_handshake.registry import Capability, capability_registry

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


# --- the JSON Schema dialect of the tools' schemas --------------------------------------------------------------

#: Draft-07, the dialect the capabilities' schemas are written in (AHP's) and checked with (checks/capabilities.py, the
#: concierge's validator): a booking slot as a tuple, a date and a party size (draft-07's array form of items).
SLOT = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_the_tools_schemas_say_the_dialect_the_site_validates_with(client, registries, version):
    """basic/index, JSON Schema Usage (2025-11-25 and 2026-07-28): "When a schema does not include a $schema field,
    it defaults to JSON Schema 2020-12", "Schemas MUST be valid according to their declared or default dialect" and
    "Clients and servers MUST validate schemas according to their declared or default dialect". A capability's
    input_schema and output_schema are draft-07 (AHP's dialect, what the site checks them and their data with), and
    the tools carried them with no $schema, so a client read them as 2020-12: a draft-07 tuple (items as an array)
    is no valid 2020-12 schema, and the official client refused every result of such a tool ("Invalid schema for
    tool"). Both schemas now say they are draft-07 (a schema's own $schema is kept)."""
    capability_registry.register(
        Capability(
            name="hold_slot",
            description="Hold a tasting slot: a date and a party size.",
            mode="MODE3",
            action_type="query",
            input_schema={"type": "object", "properties": {"slot": SLOT}},
            output_schema={"type": "object", "required": ["slot"], "properties": {"slot": SLOT}},
            handler=lambda invocation: {"slot": invocation.input["slot"]},
        )
    )
    _, body = rpc(client, "tools/list", version=version)
    tool = next(tool for tool in body["result"]["tools"] if tool["name"] == "hold_slot")
    validators = {}
    for key in ("inputSchema", "outputSchema"):
        schema = tool[key]
        # What a client does: the dialect the schema declares, else the one the spec makes the default.
        validators[key] = validator_for(schema, default=Draft202012Validator)
        validators[key].check_schema(schema)
        assert validators[key] is not Draft202012Validator, key
    arguments = {"query": "hold a slot", "slot": ["2031-05-01", 4]}
    validators["inputSchema"](tool["inputSchema"]).validate(arguments)
    assert not validators["inputSchema"](tool["inputSchema"]).is_valid({"slot": ["2031-05-01", 4, "extra"]})
    _, body = rpc(client, "tools/call", {"name": "hold_slot", "arguments": arguments}, version=version)
    result = body["result"]
    assert result["isError"] is False, result
    validators["outputSchema"](tool["outputSchema"]).validate(result["structuredContent"])
    # The revisions before the default was written down get the schemas as they are.
    _, body = rpc(client, "tools/list", version="2025-06-18")
    tool = next(tool for tool in body["result"]["tools"] if tool["name"] == "hold_slot")
    assert "$schema" not in tool["inputSchema"]
    assert tool["outputSchema"] == capability_registry.get("hold_slot").output_schema


def test_a_schema_that_names_its_own_dialect_keeps_it(client, registries):
    """ "Schemas MAY include a $schema field to specify a different dialect": one the capability gives is kept."""
    own = "https://json-schema.org/draft/2019-09/schema"
    capability_registry.register(
        Capability(
            name="own_dialect",
            description="A capability whose output schema names its dialect.",
            mode="MODE3",
            action_type="query",
            input_schema={"type": "object", "properties": {"sku": {"type": "string"}}},
            output_schema={"$schema": own, "type": "object", "properties": {"sku": {"type": "string"}}},
            handler=lambda invocation: {"sku": "x"},
        )
    )
    _, body = rpc(client, "tools/list", version="2025-11-25")
    tool = next(tool for tool in body["result"]["tools"] if tool["name"] == "own_dialect")
    assert tool["outputSchema"]["$schema"] == own
    assert tool["inputSchema"]["$schema"] == "http://json-schema.org/draft-07/schema#"


# --- the MCP-Protocol-Version header --------------------------------------------------------------------------


def test_an_initialize_with_an_unsupported_protocol_version_header_is_a_400(client):
    """basic/transports, Protocol Version Header (2025-06-18 and 2025-11-25): "If the server receives a request with
    an invalid or unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request." Every other request was
    refused so; initialize read only its body and answered 200 with a negotiated version, whatever the header said.
    It is now refused as the others are (-32022, naming what we speak), and nothing is negotiated."""
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    for header in ("1999-01-01", "not a version"):
        response, body = rpc(client, "initialize", params, version=header)
        assert response.status_code == 400, body
        assert "result" not in body
        assert body["error"]["code"] == -32022
        assert body["error"]["data"]["requested"] == header
        assert "2025-06-18" in body["error"]["data"]["supported"]
        assert body["id"] == 1
    # A header we speak, or none, is the handshake it always was.
    for header in ("2025-06-18", "2025-11-25", None):
        response, body = rpc(client, "initialize", params, version=header)
        assert response.status_code == 200, body
        assert body["result"]["protocolVersion"] == "2025-06-18"
