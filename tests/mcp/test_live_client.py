"""MCP over real HTTP: the official ``mcp`` Python client against gunicorn serving the demo content, in each way
it connects (the ``initialize`` handshake at 2025-11-25, a pinned 2026-07-28, and ``auto``, which probes
``server/discover``), and the plain JSON-RPC client of AHP Appendix D: ``2024-11-05``, no ``Accept`` header, no
session. Revisions the client cannot be made to offer (2025-03-26, 2025-06-18) are covered as raw JSON-RPC in
tests/mcp/test_mcp.py."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent_handshake.models import ConverseSession, IdempotencyRecord
from agent_handshake.registry import capability_registry
from tests.nlweb.test_live_servers import committed_key, serve

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
QUESTION = "How should I brew hojicha?"


@pytest.fixture(scope="module")
def site(demo_content, django_db_blocker):
    """gunicorn on the test database with the demo content, and an API key both can see (committed)."""
    tables = (ConverseSession, IdempotencyRecord)  # what the sessions write, so later modules start empty
    with (
        committed_key(django_db_blocker, "Live MCP agent", *tables) as secret,
        serve("gunicorn (WSGI)", "") as url,
    ):
        yield url, secret


async def session(url: str, mode: str, headers: dict[str, str] | None = None):
    """What an MCP host does: connect, list, call, read; returns what it saw."""
    seen = {}
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        seen["version"] = client.protocol_version
        seen["server"] = client.server_info
        seen["tools"] = (await client.list_tools()).tools
        seen["answer"] = await client.call_tool("content_search", {"query": QUESTION})
        seen["stock"] = await client.call_tool("check_inventory", {"query": "stock", "product": "LK-TEA-0001"})
        seen["booking"] = await client.call_tool("book_appointment", {"query": "Book me in"})
        resources = (await client.list_resources()).resources
        seen["resources"] = resources
        seen["llms"] = await client.read_resource(str(resources[0].uri))
        try:
            await client.read_resource("http://169.254.169.254/latest/meta-data")
        except MCPError as exc:
            seen["foreign"] = exc.error.code
    return seen


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
def test_the_official_client_connects_lists_calls_and_reads(site, mode):
    url, _secret = site
    seen = anyio.run(session, url, mode)
    expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
    assert seen["version"] == expected
    if mode != "2026-07-28":  # a pinned client asks no server/discover, so it has no serverInfo to show
        assert seen["server"].name == "Test Site"
    names = [tool.name for tool in seen["tools"]]
    manifest = httpx.get(f"{url}/.well-known/agent.json").json()
    assert names == [c["name"] for c in manifest["capabilities"]] + ["ask", "job_status"]
    answer = seen["answer"]
    ahp = httpx.post(f"{url}/agent/converse", json={"capability": "content_search", "query": QUESTION}).json()
    assert answer.is_error is False
    assert answer.content[0].text == ahp["response"]["answer"]
    assert [s["url"] for s in answer.structured_content["sources"]] == [s["url"] for s in ahp["response"]["sources"]]
    stock = seen["stock"]
    assert stock.is_error is False
    jsonschema.validate(stock.structured_content, capability_registry.get("check_inventory").output_schema)
    assert seen["booking"].is_error is True
    assert "Authorization: Bearer" in seen["booking"].content[0].text
    assert str(seen["resources"][0].uri) == f"{url}/llms.txt"
    assert seen["llms"].contents[0].text == httpx.get(f"{url}/llms.txt").text
    # Resource not found: -32002 until 2025-11-25; 2026-07-28 made it invalid params.
    assert seen["foreign"] == (-32002 if mode == "legacy" else -32602)


def test_the_official_client_with_a_key_runs_a_protected_tool(site):
    url, secret = site

    async def run():
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as client,
        ):
            lookup = {"query": "Where is my order?", "order_number": "LK-99999", "email": "nobody@example.com"}
            return await client.call_tool("order_status", lookup)

    result = anyio.run(run)
    # Past the credentials and the scope: the capability itself looked the order up and found none.
    assert result.is_error is True
    assert "No order matches" in result.content[0].text
    assert "requires authentication" not in result.content[0].text


def test_appendix_d_client_plain_json_rpc_without_accept_or_session(site):
    """2024-11-05 as AHP Appendix D writes it: POST, Content-Type application/json, nothing else."""
    url, secret = site

    http = httpx.Client(timeout=30)
    del http.headers["Accept"]  # httpx sends "*/*" unless told not to

    def post(message):
        response = http.post(f"{url}/mcp", content=json.dumps(message), headers={"Content-Type": "application/json"})
        assert "accept" not in response.request.headers
        return response

    client_info = {"name": "appendix-d", "version": "1"}
    params = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": client_info}
    init = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert init.status_code == 200
    assert init.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in init.headers
    assert init.json()["result"]["protocolVersion"] == "2024-11-05"
    assert init.json()["result"]["serverInfo"]["manifest"] == "/.well-known/agent.json"
    assert post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    listed = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).json()["result"]["tools"]
    assert "check_inventory" in [tool["name"] for tool in listed]
    lookup = {"query": "order LK-99999", "order_number": "LK-99999", "email": "nobody@example.com"}
    called = post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "order_status", "arguments": lookup,
                              "_meta": {"auth": f"Bearer {secret}"}}}).json()  # fmt: skip
    assert called["id"] == 3
    assert called["result"]["content"][0]["type"] == "text"
    assert "structuredContent" not in called["result"]
    assert "No order matches" in called["result"]["content"][0]["text"]  # it ran: the key was read from _meta
    # (with the key: the anonymous requests of this module's sessions have used up the address's 30 a minute)
    assert httpx.get(f"{url}/mcp", headers={"Authorization": f"Bearer {secret}"}).status_code == 405
