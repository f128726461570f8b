"""JSON-RPC batches at ``POST /mcp`` by protocol revision: 2025-03-26 added them and 2025-06-18 removed them (its
changelog, PR #416; its transport: "The body of the POST request MUST be a single JSON-RPC request, notification, or
response"). We are stateless, so a batch's revision is its ``MCP-Protocol-Version`` header, and a batch without
one speaks ``2025-03-26``, as that transport tells a server to assume."""

from __future__ import annotations

import datetime
import json

import pytest

from agent_handshake.models import AgentClient, ApiKey
from demo_site.shop.models import Appointment

pytestmark = pytest.mark.django_db

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def post(client, body, **headers):
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, (response.json() if response.content else None)


def pings(meta=None):
    params = {"params": {"_meta": meta}} if meta else {}
    return [{"jsonrpc": "2.0", "id": n, "method": "ping", **params} for n in (1, 2)]


def booking_call(request_id):
    day = datetime.date.today() + datetime.timedelta(days=1)
    while day.weekday() in (0, 6):  # the demo shop is closed on Sundays and Mondays
        day += datetime.timedelta(days=1)
    arguments = {"query": "Book a tasting", "service": "tea-tasting", "date": day.isoformat(), "time": "11:00",
                 "name": "Ada", "email": "ada@example.com"}  # fmt: skip
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "book_appointment", "arguments": arguments}}  # fmt: skip


def bearer():
    agent, _ = AgentClient.objects.get_or_create(name="batching agent")
    return f"Bearer {ApiKey.objects.issue(agent, scopes=['*'])[1]}"


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_on_a_revision_without_batches_is_an_invalid_request(client, demo_content, version):
    """The batch is refused whole (JSON-RPC's Invalid Request, 400, id null) with nothing in it run: it used to be
    answered message by message, a booking included."""
    batch = [booking_call(1), {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    headers = {"HTTP_MCP_PROTOCOL_VERSION": version, "HTTP_AUTHORIZATION": bearer()}
    response, body = post(client, batch, **headers)
    assert response.status_code == 400, body
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert "batch" in body["error"]["message"].lower()
    assert version in body["error"]["message"]
    assert not Appointment.objects.exists()
    # Each message on its own is answered on that revision.
    response, body = post(client, booking_call(3), **headers)
    assert response.status_code == 200
    assert body["result"]["isError"] is False, body
    assert Appointment.objects.count() == 1


def test_a_batch_on_2026_07_28_is_an_invalid_request(client):
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "ping"}
    response, body = post(client, pings(MODERN_META), **headers)
    assert response.status_code == 400, body
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert "2026-07-28" in body["error"]["message"]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", None])
def test_the_revisions_with_batches_keep_them(client, version):
    """Without the header (a 2024-11-05 or 2025-03-26 client sends none) a batch speaks 2025-03-26."""
    headers = {"HTTP_MCP_PROTOCOL_VERSION": version} if version else {}
    response, body = post(client, pings(), **headers)
    assert response.status_code == 200, body
    assert [answer["id"] for answer in body] == [1, 2]
    assert all(answer["result"] == {} for answer in body)


def test_a_batch_naming_a_revision_we_do_not_speak_is_a_400(client):
    """The transport: a request with an unsupported MCP-Protocol-Version MUST get 400 Bad Request. A batch was
    answered 200 with one error per message; it is now one UnsupportedProtocolVersion error, as a message gets."""
    response, body = post(client, pings(), HTTP_MCP_PROTOCOL_VERSION="1999-01-01")
    assert response.status_code == 400, body
    assert body["id"] is None
    assert body["error"]["code"] == -32022
    assert body["error"]["data"]["requested"] == "1999-01-01"
    assert "2025-03-26" in body["error"]["data"]["supported"]
