"""MCP at ``POST /mcp`` (AHP Appendix D), over the Django test client: JSON-RPC as the MCP revisions write it,
the tools and resources the registry and the database give, credentials as AHP takes them, and every refusal in
JSON-RPC's shape. tests/mcp/test_live_client.py runs the official ``mcp`` client against a real server."""

from __future__ import annotations

import base64
import datetime
import json
from http.server import BaseHTTPRequestHandler, HTTPServer
from threading import Thread

import jsonschema
import pytest
from django.test import override_settings

from agent_handshake.identity.site_key import site_did, site_public_key
from agent_handshake.mcp import resources
from agent_handshake.models import AgentClient, ApiKey, Document, Job
from agent_handshake.registry import capability_registry
from demo_site.shop.models import Appointment

pytestmark = pytest.mark.django_db

HANDSHAKE = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "spec-client", "version": "1"},
}


def rpc(client, method, params=None, *, id=1, version=None, **headers):
    """One JSON-RPC request as a 2025 client sends it (``version``: its MCP-Protocol-Version header)."""
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    if version:
        headers["HTTP_MCP_PROTOCOL_VERSION"] = version
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, (response.json() if response.content else None)


def call(client, name, arguments, **kwargs):
    return rpc(client, "tools/call", {"name": name, "arguments": arguments}, **kwargs)


def key(scopes=("*",), name="MCP agent"):
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=list(scopes))[1]


# --- lifecycle --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE)
def test_initialize_answers_the_clients_revision_statelessly(client, version):
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    response, body = rpc(client, "initialize", params)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in response
    result = body["result"]
    assert body["id"] == 1
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {"listChanged": False}, "resources": {"listChanged": False}}
    info = result["serverInfo"]
    assert {k: info.pop(k) for k in ("did", "public_key")} == {"did": site_did(), "public_key": site_public_key()}
    assert info == {"name": "Test Site", "version": "0.1", "ahp": "0.1", "manifest": "/.well-known/agent.json"}


def test_initialize_with_an_unknown_revision_offers_our_newest(client):
    _, body = rpc(client, "initialize", {"protocolVersion": "2030-01-01", "capabilities": {}})
    assert body["result"]["protocolVersion"] == "2025-11-25"


def test_ping_notifications_and_client_responses(client):
    _, body = rpc(client, "ping")
    assert body == {"jsonrpc": "2.0", "id": 1, "result": {}}
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 7, "result": {}}):  # fmt: skip
        response = client.post("/mcp", json.dumps(message), content_type="application/json")
        assert response.status_code == 202
        assert response.content == b""


def test_a_batch_gets_one_answer_per_request(client):
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "no/such"},
    ]
    response = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert response.status_code == 200
    answers = {answer["id"]: answer for answer in response.json()}
    assert set(answers) == {"a", "b"}
    assert answers["a"]["result"] == {}
    assert answers["b"]["error"]["code"] == -32601


def test_a_batch_has_the_requests_credentials_and_idempotency_key(client, demo_content):
    """A batch is one HTTP request: keys per message (_meta.auth) and one Idempotency-Key over several calls are
    refused as a whole, with nothing run."""
    secret = key()
    booking = tasting_booking()
    tool_call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "book_appointment", "arguments": booking}}
    with_meta = {**tool_call, "params": {**tool_call["params"], "_meta": {"auth": f"Bearer {secret}"}}}
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {**with_meta, "id": 2}]
    response = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert "_meta.auth" in response.json()["error"]["message"]
    two = [{**tool_call, "id": 1}, {**tool_call, "id": 2}]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}", "HTTP_IDEMPOTENCY_KEY": "batch-1"}
    response = client.post("/mcp", json.dumps(two), content_type="application/json", **headers)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert not Appointment.objects.exists()
    # One call with the key, in a batch, is fine; the header credentials cover the whole batch.
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    response = client.post("/mcp", json.dumps([two[0], ping]), content_type="application/json", **headers)
    assert response.status_code == 200
    answers = {answer["id"]: answer for answer in response.json()}
    assert answers[1]["result"]["isError"] is False, answers
    assert answers[3]["result"] == {}
    assert Appointment.objects.count() == 1


def test_2026_07_28_discover_and_the_per_request_envelope(client):
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "server/discover"}
    response, body = rpc(client, "server/discover", {"_meta": MODERN_META}, **headers)
    assert response.status_code == 200
    result = body["result"]
    assert "2026-07-28" in result["supportedVersions"]
    assert "2024-11-05" in result["supportedVersions"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["ahp"] == "0.1"
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/list"}
    _, body = rpc(client, "tools/list", {"_meta": MODERN_META}, **headers)
    assert body["result"]["resultType"] == "complete"
    assert body["result"]["tools"]


def test_a_batch_counts_each_request_against_the_rate_limit(client):
    """30 a minute per address without a key: a batch of 20 pings is 20 of them."""
    batch = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(20)]
    first = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert first.status_code == 200
    assert first["X-RateLimit-Remaining"] == "10"
    second = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert second.status_code == 429
    assert second.json()["error"]["data"]["code"] == "rate_limited"


def test_2026_07_28_tool_errors_keep_their_code_beside_the_server_info(client, demo_content):
    params = {"name": "book_appointment", "arguments": {"query": "book"}, "_meta": MODERN_META}
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call"}
    headers["HTTP_MCP_NAME"] = params["name"]
    _, body = rpc(client, "tools/call", params, **headers)
    meta = body["result"]["_meta"]
    assert body["result"]["isError"] is True
    assert meta["code"] == "auth_required"
    assert meta["io.modelcontextprotocol/serverInfo"]["ahp"] == "0.1"


def test_2026_07_28_refusals_have_the_statuses_that_revision_gives(client):
    mismatch = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "other"}
    response, body = rpc(client, "tools/call", {"name": "content_search", "arguments": {}, "_meta": MODERN_META},
                         **mismatch)  # fmt: skip
    assert response.status_code == 400
    assert body["error"]["code"] == -32020
    response, body = rpc(client, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert response.status_code == 400
    assert body["error"]["code"] == -32602
    wrong = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    response, body = rpc(client, "tools/list", {"_meta": wrong}, version="1999-01-01", HTTP_MCP_METHOD="tools/list")
    assert response.status_code == 400
    assert body["error"]["code"] == -32022
    assert body["error"]["data"]["requested"] == "1999-01-01"
    assert "2026-07-28" in body["error"]["data"]["supported"]
    response, body = rpc(client, "no/such", {"_meta": MODERN_META}, version="2026-07-28", HTTP_MCP_METHOD="no/such")
    assert response.status_code == 404
    assert body["error"]["code"] == -32601
    # The 2026-07-28 header on a request whose body does not say it: the envelope is missing.
    response, body = rpc(client, "tools/list", version="2026-07-28")
    assert response.status_code == 400
    assert body["error"]["code"] == -32602
    assert "params._meta lacks" in body["error"]["message"]


@pytest.mark.parametrize(
    ("name", "matches"),
    [
        ("content_search", True),
        ("=?base64?" + base64.b64encode(b"content_search").decode() + "?=", True),  # a client may wrap any value
        ("=?base64?" + base64.b64encode(b"check_inventory").decode() + "?=", False),
        ("=?base64?Y29udGVudF9zZWFyY2g?=", False),  # not canonical base64 (padding missing)
        ("=?base64?!!!!?=", False),
    ],
)
def test_2026_07_28_mcp_name_is_compared_after_unwrapping_base64(client, demo_content, name, matches):
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": name}
    params = {"name": "content_search", "arguments": {"query": "sencha"}, "_meta": MODERN_META}
    response, body = rpc(client, "tools/call", params, **headers)
    if matches:
        assert response.status_code == 200
        assert body["result"]["isError"] is False
    else:
        assert response.status_code == 400
        assert body["error"]["code"] == -32020


def test_an_unsupported_protocol_version_header_is_a_400(client):
    response, body = rpc(client, "tools/list", version="1999-01-01")
    assert response.status_code == 400
    assert body["error"]["code"] == -32022


def test_an_unsupported_protocol_version_header_on_a_notification_is_a_400(client):
    """The transport's MUST (2025-06-18 on) covers every request after initialize, notifications and responses
    included: they were accepted with 202 whatever the header said."""
    notification, response = {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 7}
    for message in (notification, {**response, "result": {}}):
        for version, status in (("1999-01-01", 400), ("not-a-version", 400), ("2025-06-18", 202)):
            response = client.post("/mcp", json.dumps(message), content_type="application/json",
                                   HTTP_MCP_PROTOCOL_VERSION=version)  # fmt: skip
            assert response.status_code == status, (message, version)
            if status == 400:
                assert response.json()["error"]["code"] == -32022
                assert response.json()["id"] is None


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"{not json", 400, -32700),
        (b"", 400, -32600),  # no body: no message (DRF reads none)
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', 400, -32600),
        (b"[]", 400, -32600),
        (b'"ping"', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}', 200, -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}}', 200, -32602),
    ],
)
def test_malformed_messages_get_json_rpc_errors(client, raw, status, code):
    response = client.post("/mcp", raw, content_type="application/json")
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code


def test_get_is_405_and_the_body_cap_is_413_in_json_rpc(client):
    response = client.get("/mcp")
    assert response.status_code == 405
    assert response["Allow"] == "POST, OPTIONS"
    assert response.json()["error"]["data"]["code"] == "method_not_allowed"
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 9000}})
    response = client.post("/mcp", big, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["data"]["code"] == "request_too_large"
    assert response["X-RateLimit-Limit"]


def test_origin_must_be_one_of_the_sites_hosts(client):
    response, body = rpc(client, "ping", HTTP_ORIGIN="http://attacker.example")
    assert response.status_code == 403
    assert body["error"]["data"]["code"] == "origin_refused"
    response, body = rpc(client, "ping", HTTP_ORIGIN="null")
    assert response.status_code == 403
    response, body = rpc(client, "ping", HTTP_ORIGIN="http://agents.example:8000")
    assert response.status_code == 200
    assert body["result"] == {}


def test_an_origin_that_is_not_a_url_is_refused_not_a_500(client):
    """An Origin urlsplit cannot read (an unclosed IPv6 bracket) is invalid: 403 (the transport's MUST), not 500."""
    for origin in ("http://[::1", "http://[", "https://[::1/x"):
        response, body = rpc(client, "ping", HTTP_ORIGIN=origin)
        assert response.status_code == 403, origin
        assert body["error"]["data"]["code"] == "origin_refused"


def test_origin_check_holds_when_allowed_hosts_is_a_wildcard(client):
    """ALLOWED_HOSTS = ["*"] lets any Host through, so a DNS-rebinding page would pass a Host-based check: the
    Origin must then be BASE_URL's or one of MCP_ALLOWED_ORIGINS."""
    with override_settings(ALLOWED_HOSTS=["*"]):
        response, _ = rpc(client, "ping", HTTP_ORIGIN="http://attacker.example", HTTP_HOST="attacker.example")
        assert response.status_code == 403
        response, _ = rpc(client, "ping")  # no Origin: not a browser
        assert response.status_code == 200
    app = {"BASE_URL": "https://shop.example", "MCP_ALLOWED_ORIGINS": ["https://console.example:8443"]}
    with override_settings(ALLOWED_HOSTS=["*"], AGENT_HANDSHAKE=app):
        for origin, status in [("https://shop.example", 200), ("https://SHOP.example:443", 200),
                               ("http://shop.example", 403), ("https://console.example:8443", 200),
                               ("https://console.example", 403), ("https://attacker.example", 403)]:  # fmt: skip
            response, _ = rpc(client, "ping", HTTP_ORIGIN=origin)
            assert response.status_code == status, origin


# --- tools ------------------------------------------------------------------------------------------------------


def test_tools_are_the_manifests_capabilities_plus_ask_and_job_status(client, demo_content):
    manifest = client.get("/.well-known/agent.json").json()
    _, body = rpc(client, "tools/list", version="2025-06-18")
    tools = {tool["name"]: tool for tool in body["result"]["tools"]}
    assert list(tools) == [c["name"] for c in manifest["capabilities"]] + ["ask", "job_status"]
    for entry in manifest["capabilities"]:
        tool = tools[entry["name"]]
        assert tool["description"] == entry["description"]
        schema = tool["inputSchema"]
        # An action takes its input as fields or asks for what is missing, so only a question needs its query.
        assert schema.get("required") == (None if entry.get("action_type") else ["query"]), entry["name"]
        assert {"query", "session_id"} <= set(schema["properties"])
        if entry.get("input_schema"):
            assert set(entry["input_schema"]["properties"]) <= set(schema["properties"])
        assert tool["annotations"]["readOnlyHint"] is (entry.get("action_type") in (None, "query"))
        if entry.get("output_schema") and entry.get("action_type") in ("query", "action"):
            assert tool["outputSchema"] == entry["output_schema"]
        else:
            assert "outputSchema" not in tool
    _, old = rpc(client, "tools/list", version="2024-11-05")
    assert all("outputSchema" not in tool and "title" not in tool for tool in old["result"]["tools"])


def test_a_question_tool_answers_as_ahp_does(client, demo_content):
    question = "How should I brew hojicha?"
    ahp = client.post("/agent/converse", {"capability": "content_search", "query": question},
                      content_type="application/json").json()  # fmt: skip
    response, body = call(client, "content_search", {"query": question}, version="2025-06-18")
    result = body["result"]
    assert response.status_code == 200
    assert result["isError"] is False
    assert result["content"][0]["text"] == ahp["response"]["answer"]
    structured = result["structuredContent"]
    assert [s["url"] for s in structured["sources"]] == [s["url"] for s in ahp["response"]["sources"]]
    assert json.loads(result["content"][1]["text"]) == structured
    _, follow = call(client, "ask", {"query": "And how much leaf?", "session_id": structured["session_id"]})
    assert follow["result"]["isError"] is False
    assert follow["result"]["content"][0]["text"]
    _, old = call(client, "content_search", {"query": question}, version="2024-11-05")
    assert "structuredContent" not in old["result"]
    assert old["result"]["content"][0]["text"] == ahp["response"]["answer"]


def test_a_query_capability_takes_structured_arguments_or_a_query(client, demo_content):
    schema = capability_registry.get("check_inventory").output_schema
    for arguments in ({"query": "stock?", "product": "LK-TEA-0001"}, {"query": "Is LK-TEA-0001 in stock?"}):
        _, body = call(client, "check_inventory", arguments, version="2025-11-25")
        result = body["result"]
        assert result["isError"] is False, result
        jsonschema.validate(result["structuredContent"], schema)
        assert result["structuredContent"]["sku"] == "LK-TEA-0001"
        assert "LK-TEA-0001" in result["content"][0]["text"]
    _, body = call(client, "check_inventory", {"query": "stock", "colour": "green"})
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["fields"] == ["arguments.colour"]
    _, body = call(client, "check_inventory", {"query": "stock", "product": 5})
    assert body["result"]["isError"] is True
    assert "arguments.product" in body["result"]["_meta"]["fields"]


def tasting_booking() -> dict:
    """book_appointment's input for the next day the shop opens."""
    day = datetime.date.today() + datetime.timedelta(days=1)
    while day.weekday() in (0, 6):
        day += datetime.timedelta(days=1)
    return {"query": "Book a tasting", "service": "tea-tasting", "date": day.isoformat(), "time": "11:00",
            "name": "Ada", "email": "ada@example.com"}  # fmt: skip


def test_a_protected_tool_says_how_to_authenticate_and_takes_ahps_credentials(client, demo_content):
    booking = tasting_booking()
    response, body = call(client, "book_appointment", booking)
    assert response.status_code == 200
    assert body["result"]["isError"] is True
    assert "Authorization: Bearer" in body["result"]["content"][0]["text"]
    assert (
        'resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"' in response["WWW-Authenticate"]
    )
    assert not Appointment.objects.exists()
    metadata = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["resource"] == "http://testserver/mcp"
    assert metadata["bearer_methods_supported"] == ["header"]

    secret = key()
    response, body = call(client, "book_appointment", booking, version="2025-06-18",
                          HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_IDEMPOTENCY_KEY="book-1")  # fmt: skip
    assert body["result"]["isError"] is False, body
    reference = body["result"]["structuredContent"]["reference"]
    assert Appointment.objects.get().reference == reference
    # A retry with the same Idempotency-Key books nothing more and gets the first answer.
    response, again = call(client, "book_appointment", booking, version="2025-06-18",
                           HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_IDEMPOTENCY_KEY="book-1")  # fmt: skip
    assert again == body
    assert response["Idempotent-Replayed"] == "true"
    assert Appointment.objects.count() == 1
    # params._meta.auth (Appendix D.5), with or without "Bearer ": the call reaches the capability.
    lookup = {"query": "status", "order_number": "LK-99999", "email": "nobody@example.com"}
    for token in (secret, f"Bearer {secret}"):
        params = {"name": "order_status", "arguments": lookup, "_meta": {"auth": token}}
        _, body = rpc(client, "tools/call", params)
        assert body["result"]["_meta"]["code"] == "invalid_request"  # the capability's own refusal: it ran
        assert "No order matches" in body["result"]["content"][0]["text"]
    _, body = rpc(client, "tools/call", {"name": "order_status", "arguments": {"query": "status"},
                                         "_meta": {"auth": secret}})  # fmt: skip
    assert body["result"]["_meta"]["code"] == "missing_field"
    assert body["result"]["_meta"]["missing"] == ["order_number", "email"]
    # A key without the scope is refused; a wrong key is a 401.
    narrow = key(scopes=["reports"], name="Narrow agent")
    _, body = call(client, "order_status", {"query": "order 1"}, HTTP_X_AHP_KEY=narrow)
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["code"] == "forbidden"
    response, body = call(client, "order_status", {"query": "x"}, HTTP_AUTHORIZATION="Bearer ahp_wrong")
    assert response.status_code == 401
    assert body["error"]["data"]["code"] == "auth_required"
    assert "resource_metadata=" in response["WWW-Authenticate"]


def test_an_async_tool_returns_its_job_and_job_status_reads_it_for_its_caller_only(client, demo_content):
    secret = key()
    _response, body = call(client, "compile_report", {"query": "report", "topic": "tea", "seconds": 0},
                          version="2025-06-18", HTTP_AUTHORIZATION=f"Bearer {secret}")  # fmt: skip
    result = body["result"]
    assert result["isError"] is False, result
    structured = result["structuredContent"]
    job = Job.objects.get(pk=structured["job_id"])
    assert structured["status"] == "accepted"
    assert structured["poll"].endswith(f"/agent/converse/status/{job.pk}")
    assert job.protocol == "mcp"
    assert job.capability == "compile_report"
    _, body = call(client, "job_status", {"job_id": job.pk}, version="2025-06-18",
                   HTTP_AUTHORIZATION=f"Bearer {secret}")  # fmt: skip
    assert body["result"]["structuredContent"]["status"] == job.status
    _, body = call(client, "job_status", {"job_id": job.pk}, HTTP_AUTHORIZATION=f"Bearer {key(name='Other')}")
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["code"] == "forbidden"
    _, body = call(client, "job_status", {"job_id": job.pk})
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["code"] == "auth_required"


def test_an_unknown_tool_is_invalid_params_naming_the_tools(client, demo_content):
    _, body = call(client, "rm_rf", {"query": "x"})
    assert body["error"]["code"] == -32602
    assert "content_search" in body["error"]["data"]["available_tools"]


# --- resources --------------------------------------------------------------------------------------------------


def test_resources_list_every_document_page_by_page(client, demo_content, monkeypatch):
    monkeypatch.setattr(resources, "PAGE_SIZE", 7)
    uris, cursor, pages = [], None, 0
    while True:
        _, body = rpc(client, "resources/list", {"cursor": cursor} if cursor else {})
        uris += [resource["uri"] for resource in body["result"]["resources"]]
        pages += 1
        cursor = body["result"].get("nextCursor")
        if not cursor:
            break
    documents = Document.objects.order_by("pk").values_list("url", flat=True)
    assert uris == ["http://testserver/llms.txt", "http://testserver/llms-full.txt"] + [
        f"http://testserver{url}" for url in documents
    ]
    assert pages == -(-len(documents) // 7)
    _, body = rpc(client, "resources/list", {"cursor": "not-ours"})
    assert body["error"]["code"] == -32602


def test_a_cursor_or_uri_that_does_not_parse_is_a_json_rpc_error(client, demo_content):
    """A cursor of deeply nested JSON made the decoder recurse (RecursionError) and a URI with an unclosed IPv6
    bracket made urlsplit raise: both were 500s."""
    deep = base64.urlsafe_b64encode(b"[" * 3000).decode()
    response, body = rpc(client, "resources/list", {"cursor": deep})
    assert response.status_code == 200
    assert body["error"]["code"] == -32602
    for uri in ("http://[::1/x", "http://[/llms.txt"):
        response, body = rpc(client, "resources/read", {"uri": uri})
        assert response.status_code == 200
        assert body["error"] == {"code": -32002, "message": "Resource not found", "data": {"uri": uri}}


def test_resources_read_serves_the_sites_own_markdown(client, demo_content):
    _, body = rpc(client, "resources/read", {"uri": "http://testserver/llms.txt"})
    assert body["result"]["contents"][0]["text"] == client.get("/llms.txt").content.decode()
    _, body = rpc(client, "resources/read", {"uri": "http://testserver/llms-full.txt"})
    assert body["result"]["contents"][0]["text"] == b"".join(client.get("/llms-full.txt").streaming_content).decode()
    document = Document.objects.order_by("pk").first()
    _, body = rpc(client, "resources/read", {"uri": f"http://testserver{document.url}"})
    markdown = client.get(document.url, HTTP_ACCEPT="text/markdown").content.decode()
    signals = {"ai_train": False, "ai_input": True, "search": True, "attribution_required": True}
    assert body["result"]["contents"] == [
        {
            "uri": f"http://testserver{document.url}",
            "mimeType": "text/markdown",
            "text": markdown,
            "_meta": {"content_signals": signals},
        }
    ]


def test_resources_leave_out_a_model_no_longer_registered(client, demo_content, registries):
    """Unregistering a model leaves its documents in the table until they are removed: they are no longer listed or
    read, as llms.txt and the markdown versions leave them out."""
    from demo_site.videos.models import Video

    video = Document.objects.filter(content_type__model="video").order_by("pk").first()
    uri = f"http://testserver{video.url}"
    _, body = rpc(client, "resources/read", {"uri": uri})
    assert "result" in body
    content_registry, _ = registries
    content_registry.unregister(Video)
    _, body = rpc(client, "resources/read", {"uri": uri})
    assert body["error"]["code"] == -32002
    _, body = rpc(client, "resources/list", {})
    listed = {resource["uri"] for resource in body["result"]["resources"]}
    assert uri not in listed
    assert len(listed) > 2  # the other models' documents are still there


def test_resources_read_never_fetches_a_uri(client, demo_content):
    hits = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"secret")

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Recorder)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        for uri in (f"http://127.0.0.1:{port}/latest/meta-data", "file:///etc/passwd", "http://testserver/nope",
                    "http://169.254.169.254/latest"):  # fmt: skip
            _, body = rpc(client, "resources/read", {"uri": uri})
            assert body["error"]["code"] == -32002
            assert body["error"]["data"] == {"uri": uri}
    finally:
        server.shutdown()
    assert hits == []


@override_settings(ALLOWED_HOSTS=["testserver"], DEBUG=False)
def test_the_manifest_declares_the_integration(client):
    manifest = client.get("/.well-known/agent.json").json()
    assert manifest["integrations"]["mcp"] == {
        "url": "/mcp",
        "version": "2024-11-05",
        "versions": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
    }


def test_a_members_only_content_search_is_refused_to_ask_without_its_scope(client, demo_content, registries):
    """A site may register its own ``content_search`` with a scope (members-only content): the ``ask`` tool runs it
    and must check the credentials as ``tools/call content_search`` does."""
    import dataclasses

    builtin = capability_registry.get("content_search")
    capability_registry._capabilities["content_search"] = dataclasses.replace(builtin, scope="members")
    for name in ("ask", "content_search"):
        _, body = call(client, name, {"query": "How hot should the water be for gyokuro?"})
        assert body["result"]["isError"] is True, name
        assert body["result"]["_meta"]["code"] == "auth_required", name
        _, body = call(client, name, {"query": "gyokuro"}, HTTP_AUTHORIZATION=f"Bearer {key(scopes=('orders',))}")
        assert body["result"]["_meta"]["code"] == "forbidden", name
    _, body = call(client, "ask", {"query": "gyokuro"}, HTTP_AUTHORIZATION=f"Bearer {key(scopes=('members',))}")
    assert "isError" not in body["result"] or body["result"]["isError"] is False


def test_a_batch_of_reads_shares_one_resource_budget(client, demo_content, settings):
    """``MCP_MAX_RESOURCE_CHARS`` bounds what one HTTP request holds in memory: twenty reads of llms-full.txt in a
    batch were twenty times the cap."""
    full = b"".join(client.get("/llms-full.txt").streaming_content).decode()
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "MCP_MAX_RESOURCE_CHARS": len(full) + 100}
    full = b"".join(client.get("/llms-full.txt").streaming_content).decode()  # its marker names the settings too
    _, body = rpc(client, "resources/read", {"uri": "http://testserver/llms-full.txt"})
    assert body["result"]["contents"][0]["text"] == full  # one read fits
    read = {"jsonrpc": "2.0", "method": "resources/read", "params": {"uri": "http://testserver/llms-full.txt"}}
    response = client.post("/mcp", json.dumps([{**read, "id": n} for n in range(3)]), content_type="application/json")
    answers = sorted(response.json(), key=lambda answer: answer["id"])
    assert answers[0]["result"]["contents"][0]["text"] == full
    assert [answer["error"]["code"] for answer in answers[1:]] == [-32602, -32602]
    assert "this request may still read" in answers[1]["error"]["message"]
    document = Document.objects.order_by("pk").first()
    small = {**read, "params": {"uri": f"http://testserver{document.url}"}}
    response = client.post("/mcp", json.dumps([{**read, "id": 1}, {**small, "id": 2}]), content_type="application/json")
    answers = sorted(response.json(), key=lambda answer: answer["id"])
    assert "result" in answers[0]
    assert answers[1]["error"]["code"] == -32602  # over the budget with what came before it
    assert document.url in answers[1]["error"]["message"]


def test_an_input_schema_with_local_definitions_keeps_them_in_the_tool(client, registries):
    """pydantic writes ``{"$defs": {...}, "properties": {"sku": {"$ref": "#/$defs/Sku"}}}``: the tool's inputSchema
    must carry the definitions its properties refer to, or a client cannot resolve them."""
    from agent_handshake.registry import Capability

    schema = {
        "type": "object",
        "$defs": {"Sku": {"type": "string", "pattern": "^LK-[0-9]+$"}},
        "properties": {"sku": {"$ref": "#/$defs/Sku"}},
    }
    capability_registry.register(
        Capability(
            name="stock_of",
            description="Stock of a SKU",
            mode="MODE3",
            action_type="query",
            input_schema=schema,
            output_schema={"type": "object"},
            handler=lambda invocation: {},
        )
    )
    _, body = rpc(client, "tools/list")
    tool = next(tool for tool in body["result"]["tools"] if tool["name"] == "stock_of")
    jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
    jsonschema.validate({"query": "stock", "sku": "LK-1"}, tool["inputSchema"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "stock", "sku": "tea"}, tool["inputSchema"])


def test_an_action_called_as_its_advertised_input_schema_allows(client, demo_content):
    """A client that builds its call from tools/list (as hosts do: the schema's required fields, then what it knows)
    sends an action its fields without a query; the schema must allow that call, and the call must run."""
    _, body = rpc(client, "tools/list", version="2025-06-18")
    tool = next(t for t in body["result"]["tools"] if t["name"] == "book_appointment")
    booking = {name: value for name, value in tasting_booking().items() if name != "query"}
    jsonschema.validate(booking, tool["inputSchema"])  # what the server advertises accepts it
    _, body = call(client, "book_appointment", booking, version="2025-06-18", HTTP_AUTHORIZATION=f"Bearer {key()}")
    assert body["result"]["isError"] is False, body
    assert Appointment.objects.get().reference == body["result"]["structuredContent"]["reference"]
