"""MCP at ``POST /mcp`` measured against the MCP specification's text (basic/lifecycle, basic/transports and the schema
of each revision we speak): each test holds the server to what that text says. Raw JSON-RPC over the Django test client,
as in tests/mcp/test_mcp.py."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import Document

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


# --- responses from the client ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}},  # 2025-11-25: id is optional
    ],
)
def test_an_error_response_whose_id_could_not_be_read_is_accepted(client, message):
    """JSON-RPC 2.0: an error response to a request whose id could not be determined has "id": null, and MCP
    (2025-11-25 on) lets an error response leave the id out "in error cases where the ID could not be read".
    Streamable HTTP: a POST of only responses or notifications gets 202 Accepted with no body when accepted. It was
    refused with 400 -32600, so a client reporting a message of ours it could not read was told it had erred."""
    for body in (message, [message], [message, {"jsonrpc": "2.0", "method": "notifications/initialized"}]):
        response, answer = post(client, body)
        assert response.status_code == 202, answer
        assert response.content == b""


def test_a_result_response_still_needs_the_requests_id(client):
    """A result answers a request, so it names it: a null id there is still an invalid message."""
    response, body = post(client, {"jsonrpc": "2.0", "id": None, "result": {}})
    assert response.status_code == 400
    assert body["error"]["code"] == -32600


# --- resources ----------------------------------------------------------------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern(client, method, params, **headers):
    """A 2026-07-28 request: its envelope in params._meta, mirrored in the headers."""
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": method, **headers}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    return post(client, body, **headers)


def test_a_resource_that_does_not_exist_is_invalid_params_on_2026_07_28(client, demo_content):
    """2026-07-28 server/resources, Error Handling: "If the requested resource does not exist, servers MUST return
    a JSON-RPC error with code -32602 (Invalid Params)"; -32002 is what earlier revisions used. It was -32002 on
    every revision."""
    for uri in ("http://testserver/nope", "file:///etc/passwd"):
        response, body = modern(client, "resources/read", {"uri": uri}, HTTP_MCP_NAME=uri)
        assert response.status_code == 400
        assert body["error"]["code"] == -32602
        assert body["error"]["data"] == {"uri": uri}
    # The earlier revisions keep their code.
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "http://testserver/nope"}}
    response, answer = post(client, body, HTTP_MCP_PROTOCOL_VERSION="2025-11-25")
    assert response.status_code == 200
    assert answer["error"]["code"] == -32002


# --- 2026-07-28 request headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "left_out"),
    [
        ("tools/list", {}, "HTTP_MCP_PROTOCOL_VERSION"),
        ("tools/list", {}, "HTTP_MCP_METHOD"),
        ("server/discover", {}, "HTTP_MCP_METHOD"),
        ("tools/call", {"name": "content_search", "arguments": {"query": "sencha"}}, "HTTP_MCP_NAME"),
        ("resources/read", {"uri": "http://testserver/llms.txt"}, "HTTP_MCP_NAME"),
    ],
)
def test_a_2026_07_28_request_without_its_mirrored_headers_is_a_header_mismatch(client, method, params, left_out):
    """2026-07-28 Streamable HTTP, Server Validation: "A required standard header (MCP-Protocol-Version, Mcp-Method,
    Mcp-Name) is missing" is a validation failure, rejected with 400 and -32020 ("Client omits header but value is in
    body: Server MUST reject the request"), so a gateway that routes or limits on the headers cannot be walked
    around by leaving them out. Only headers that were sent were compared."""
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": method}
    if "name" in params or "uri" in params:
        headers["HTTP_MCP_NAME"] = params.get("name") or params["uri"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    response, answer = post(client, body, **headers)
    assert response.status_code == 200, answer
    del headers[left_out]
    response, answer = post(client, body, **headers)
    assert response.status_code == 400, answer
    assert answer["error"]["code"] == -32020
    assert answer["id"] == 1


def test_mcp_name_is_not_expected_when_the_body_has_no_name(client):
    """ "Parameter value is null / not in arguments: Server MUST NOT expect the header": a call without a name is
    the invalid params it always was, not a header mismatch."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}, "_meta": MODERN_META}}
    response, answer = post(client, body, HTTP_MCP_PROTOCOL_VERSION="2026-07-28", HTTP_MCP_METHOD="tools/call")
    assert response.status_code == 400
    assert answer["error"]["code"] == -32602


def test_a_listed_resource_at_an_absolute_url_on_another_host_can_be_read(client, publish, registries):
    """get_url may give an absolute URL (README, "Registering content"): such a document was listed as that URL, and
    resources/read of the URI it had just listed answered "Resource not found" (only this site's host was read). A
    listed URI is now read from the database like any other; a URI on another host that no document has is still
    not found, and nothing is fetched."""
    from tests.testapp.agents import ArticleContent
    from tests.testapp.models import Article

    class BlogContent(ArticleContent):
        def get_url(self, obj):
            return f"https://blog.example/articles/{obj.slug}/"

    content_registry, _ = registries
    content_registry.unregister(Article)
    content_registry.register(Article, BlogContent)
    publish(Article, title="Hojicha", slug="hojicha", body="Roasted green tea.")
    assert Document.objects.get(title="Hojicha").url == "https://blog.example/articles/hojicha/"
    _, body = post(client, {"jsonrpc": "2.0", "id": 1, "method": "resources/list"})
    [listed] = [resource for resource in body["result"]["resources"] if resource["name"] == "Hojicha"]
    assert listed["uri"] == "https://blog.example/articles/hojicha/"
    read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": listed["uri"]}}
    response, body = post(client, read)
    assert response.status_code == 200
    assert "Roasted green tea." in body["result"]["contents"][0]["text"], body
    for uri in ("https://blog.example/articles/other/", "https://elsewhere.example/articles/hojicha/"):
        _, body = post(client, {**read, "params": {"uri": uri}})
        assert body["error"]["code"] == -32002, uri
