"""A request whose ``Content-Length`` is over the size cap is refused from its headers alone (413), without reading
the body, on every front door. MCP's error read it anyway, to find the JSON-RPC ``id`` to answer with, so a client
that declared a large body and sent none held the server's worker until it gave up (a slow-body attack through a path
meant to be cheap)."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import pytest

from agent_handshake.conf import app_settings


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/mcp", "/agent/converse", "/ask", "/intent", "/capabilities/content_search"])
def test_a_body_declared_too_large_is_refused_without_being_read(live_server, path):
    address = urlsplit(live_server.url)
    declared = app_settings.MAX_REQUEST_BYTES * 4
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {address.hostname}:{address.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head.encode() + b'{"jsonrpc": "2.0", "id": 7, ')  # and nothing more: the body never comes
        sock.settimeout(5)
        started = time.monotonic()
        received = b""
        try:
            while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            pytest.fail(f"no answer in {time.monotonic() - started:.1f} s: the server waited for the body")
    status_line, _, rest = received.partition(b"\r\n")
    assert b" 413 " in status_line, received[:300]
    body = json.loads(rest.split(b"\r\n\r\n", 1)[1])  # the protocol's error, as JSON
    if path == "/mcp":
        assert body["jsonrpc"] == "2.0"
        assert body["id"] is None  # the id is in the body, which is not read
