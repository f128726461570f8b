"""MCP at ``POST /mcp``: defects found in review, each with the test that failed before its fix (the Django test
client and raw JSON-RPC as the MCP revisions write it, as in tests/test_mcp.py)."""

from __future__ import annotations

import json

import pytest
from django.contrib.contenttypes.models import ContentType

from agent_handshake import state
from agent_handshake.models import ContentSignalOverride, Document, SiteProfile
from demo_site.videos.models import Video

pytestmark = pytest.mark.django_db


def rpc(client, method, params=None, *, id=1, **headers):
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    response = client.post("/mcp", json.dumps(body), content_type="application/json", **headers)
    return response, (response.json() if response.content else None)


# --- resources ----------------------------------------------------------------------------------------------------


def test_resources_read_carries_the_documents_own_content_signals(client, demo_content):
    """A model whose content signals differ from the site's (ai-input off for videos): its markdown version over HTTP
    says so in Content-Signal, but resources/read of the same page answered with the site-wide header (ai-input=yes)
    and nothing in the result. The result's contents now carry the document's signals in _meta, and the response's
    Content-Signal header is the document's, as the markdown version's is."""
    profile = SiteProfile.load()
    profile.save()
    ContentSignalOverride.objects.create(
        profile=profile, content_type=ContentType.objects.get_for_model(Video), ai_input=False, search=False
    )
    state.invalidate()
    video = Document.objects.filter(content_type__model="video").order_by("pk").first()
    markdown = client.get(video.url, HTTP_ACCEPT="text/markdown")
    assert markdown["Content-Signal"] == "search=no, ai-input=no, ai-train=no"
    for version in ("2025-03-26", "2025-11-25"):
        response, body = rpc(
            client, "resources/read", {"uri": f"http://testserver{video.url}"}, HTTP_MCP_PROTOCOL_VERSION=version
        )
        assert response["Content-Signal"] == markdown["Content-Signal"]
        [content] = body["result"]["contents"]
        assert content["text"] == markdown.content.decode()
        assert content["_meta"]["content_signals"] == {
            "ai_train": False,
            "ai_input": False,
            "search": False,
            "attribution_required": True,
        }
    # The site's own documents keep the site's signals; a batch's header is the strictest of what it read.
    response, body = rpc(client, "resources/read", {"uri": "http://testserver/llms.txt"})
    assert response["Content-Signal"] == "search=yes, ai-input=yes, ai-train=no"
    assert body["result"]["contents"][0]["_meta"]["content_signals"]["ai_input"] is True
    batch = [
        {"jsonrpc": "2.0", "id": n, "method": "resources/read", "params": {"uri": f"http://testserver{url}"}}
        for n, url in enumerate(["/llms.txt", video.url])
    ]
    response = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert response["Content-Signal"] == "search=no, ai-input=no, ai-train=no"
