"""What a client sent is quoted in an MCP error in a bounded size: a name cut, a list of names capped, as every
other front door quotes them (agent_handshake.concierge.validation). The body cap bounds a body's strings, but an
error quoting them whole doubles what an agent can make the site send and log, and headers (MCP-Protocol-Version,
Mcp-Name, Origin) have no body cap at all."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import AgentClient, ApiKey

pytestmark = pytest.mark.django_db

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: Far more than any error about a name needs, far less than what is sent below.
BOUND = 1500
LONG = 6000


def post(client, body, **headers):
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, response.json()


def request(method, params=None, id=1):
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def secret():
    agent, _ = AgentClient.objects.get_or_create(name="echo test")
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def test_a_long_method_or_tool_name_is_quoted_cut(client, demo_content):
    response, body = post(client, request("m" * LONG))
    assert response.status_code == 200
    assert body["error"]["code"] == -32601
    assert body["error"]["message"].startswith("Method not found: mmm")
    assert len(response.content) < BOUND, len(response.content)
    response, body = post(client, request("tools/call", {"name": "t" * LONG, "arguments": {}}))
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("Unknown tool: ttt")
    assert "content_search" in body["error"]["data"]["available_tools"]
    assert len(response.content) < BOUND, len(response.content)


def test_a_long_resource_uri_or_job_id_is_quoted_cut(client, demo_content):
    uri = "http://testserver/" + "u" * LONG
    response, body = post(client, request("resources/read", {"uri": uri}))
    assert body["error"]["code"] == -32002
    assert body["error"]["data"]["uri"].startswith("http://testserver/uuu")
    assert len(response.content) < BOUND, len(response.content)
    arguments = {"job_id": "j" * LONG}
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret()}"}
    response, body = post(client, request("tools/call", {"name": "job_status", "arguments": arguments}), **auth)
    assert body["result"]["isError"] is True
    assert "jjj" in body["result"]["content"][0]["text"]
    assert len(response.content) < BOUND, len(response.content)


def test_unknown_arguments_are_named_cut_and_capped(client, demo_content):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret()}"}
    for arguments in ({"x" * LONG: 1}, {f"unknown_argument_{n:03}": 1 for n in range(200)}):
        params = {"name": "book_appointment", "arguments": arguments}
        response, body = post(client, request("tools/call", params), **auth)
        result = body["result"]
        assert result["isError"] is True
        assert result["_meta"]["code"] == "invalid_request"
        assert result["content"][0]["text"].startswith("Unknown arguments for 'book_appointment': ")
        assert 1 <= len(result["_meta"]["fields"]) <= 10
        fields = result["_meta"]["fields"]
        assert all(field.startswith(("arguments.xxx", "arguments.unknown_argument_")) for field in fields)
        assert len(response.content) < BOUND, len(response.content)


def test_long_header_values_are_quoted_cut(client):
    response, body = post(client, request("ping"), HTTP_MCP_PROTOCOL_VERSION="v" * LONG)
    assert response.status_code == 400
    assert body["error"]["code"] == -32022
    assert body["error"]["data"]["requested"].startswith("vvv")
    assert len(response.content) < BOUND, len(response.content)
    response, body = post(client, request("ping"), HTTP_ORIGIN="http://" + "a" * LONG + ".example")
    assert response.status_code == 403
    assert body["error"]["data"]["code"] == "origin_refused"
    assert len(response.content) < BOUND, len(response.content)
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "n" * LONG}
    params = {"name": "content_search", "arguments": {"query": "tea"}, "_meta": MODERN_META}
    response, body = post(client, request("tools/call", params), **headers)
    assert response.status_code == 400
    assert body["error"]["code"] == -32020
    assert "Mcp-Name" in body["error"]["message"]
    assert len(response.content) < BOUND, len(response.content)
    # The body's side of a mismatch: a name as long as the body allows, with the header left out.
    headers.pop("HTTP_MCP_NAME")
    params = {**params, "name": "c" * LONG}
    response, body = post(client, request("tools/call", params), **headers)
    assert response.status_code == 400
    assert body["error"]["code"] == -32020
    assert len(response.content) < BOUND, len(response.content)
