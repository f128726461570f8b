"""An unknown session's error quotes the id the client sent, bounded as every echo is (concierge.validation.shown):
AHP caps ``session_id`` at 128 characters, but MCP's tool arguments and NLWeb's conversation take it as sent, and
the error repeated all of it (up to the body cap: 8 KB sent, 8 KB back)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


def test_an_unknown_session_id_is_quoted_bounded(client, demo_content):
    session_id = "s" * 6000
    params = {"name": "content_search", "arguments": {"query": "gyokuro", "session_id": session_id}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = client.post("/mcp", json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True, result
    assert result["_meta"]["reason"] == "unknown_session", result
    text = result["content"][0]["text"]
    assert "Unknown session 'sss" in text
    assert len(text) < 400, len(text)
