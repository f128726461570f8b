"""MCP at ``POST /mcp``: resources/read with the document's own content signals, CORS for a browser page at an allowed
origin, and a resource of a non-ASCII URL listed as a URI and read by it (the Django test client and raw JSON-RPC as the
MCP revisions write it, as in tests/mcp/test_mcp.py)."""

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


# --- transport ----------------------------------------------------------------------------------------------------

CONSOLE = "https://console.example:8443"
#: Request headers a browser sends without asking (the Fetch standard's CORS-safelisted ones, as a client sends them).
SAFELISTED_REQUEST = {"accept", "accept-language", "content-language"}
#: Response headers a page reads without their being exposed (the Fetch standard's CORS-safelisted ones).
SAFELISTED_RESPONSE = {
    "cache-control",
    "content-language",
    "content-length",
    "content-type",
    "expires",
    "last-modified",
    "pragma",
}


def header_list(value):
    return {item.strip().lower() for item in (value or "").split(",") if item.strip()}


def browser_fetch(client, origin, body, headers):
    """What a browser's fetch() does for a cross-origin POST (the Fetch standard's CORS protocol): a preflight for
    the non-safelisted headers (a JSON Content-Type is one), then the request; it returns the response and the
    headers the page can read, or raises where the browser would give the page a network error."""
    names = sorted(name.lower() for name in [*headers, "Content-Type"] if name.lower() not in SAFELISTED_REQUEST)
    preflight = client.options(
        "/mcp",
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS=",".join(names),
    )
    assert 200 <= preflight.status_code < 300, f"preflight failed: {preflight.status_code}"
    assert preflight.get("Access-Control-Allow-Origin") in (origin, "*"), "preflight: origin not allowed"
    allowed = header_list(preflight.get("Access-Control-Allow-Headers"))
    for name in names:  # "*" does not cover Authorization
        assert name in allowed or ("*" in allowed and name != "authorization"), f"preflight: {name} not allowed"
    meta = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
    response = client.post("/mcp", json.dumps(body), content_type="application/json", HTTP_ORIGIN=origin, **meta)
    assert response.get("Access-Control-Allow-Origin") in (origin, "*"), "response: origin not allowed"
    exposed = SAFELISTED_RESPONSE | header_list(response.get("Access-Control-Expose-Headers"))
    readable = {name: value for name, value in response.headers.items() if name.lower() in exposed}
    return response, readable


def test_a_browser_page_at_an_allowed_origin_can_call_mcp(client, settings):
    """MCP_ALLOWED_ORIGINS names browser origins allowed to call /mcp, but /mcp answered no CORS: a page there had
    its preflight (and any response) refused by the browser, so no allowed origin could call it. An Origin the
    check allows now gets CORS (the preflight's headers, Access-Control-Allow-Origin, the MCP and rate-limit
    headers exposed); a refused one still gets 403 and nothing to read."""
    settings.AGENT_HANDSHAKE = {"MCP_ALLOWED_ORIGINS": [CONSOLE]}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"MCP-Protocol-Version": "2025-11-25", "Authorization": "Bearer not-a-key"}
    response, readable = browser_fetch(client, CONSOLE, ping, headers)
    assert response.status_code == 401
    assert "WWW-Authenticate" in readable
    response, readable = browser_fetch(client, CONSOLE, ping, {"MCP-Protocol-Version": "2025-11-25"})
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert {"X-RateLimit-Remaining", "Content-Signal"} <= set(readable)
    assert "Origin" in response["Vary"]
    # The page at a refused origin: 403, and nothing the browser lets it read.
    with pytest.raises(AssertionError, match="preflight failed: 403"):
        browser_fetch(client, "https://attacker.example", ping, headers)
    refused = client.post(
        "/mcp", json.dumps(ping), content_type="application/json", HTTP_ORIGIN="https://attacker.example"
    )
    assert refused.status_code == 403
    assert "Access-Control-Allow-Origin" not in refused


@pytest.mark.parametrize(
    ("slug", "uri"),
    [
        ("日本茶", "/articles/%E6%97%A5%E6%9C%AC%E8%8C%B6/"),
        ("café", "/articles/caf%C3%A9/"),
        ("green tea", "/articles/green%20tea/"),
    ],
)
def test_a_resource_of_a_non_ascii_url_is_listed_as_a_uri_and_read_by_it(client, publish, slug, uri):
    """An object URL written as an IRI ("/articles/日本茶/") or with a space was listed as it was: not a URI (MCP's
    Resource.uri is one), and the URI a client's URL library makes of it (percent-encoded) was "Resource not
    found". The listing now gives the URI, and resources/read finds the document by it (or by the IRI)."""
    from tests.testapp.models import Article

    publish(Article, title="Tea", slug=slug, body="Tea.", published=True)
    _, body = rpc(client, "resources/list", {})
    [listed] = [resource for resource in body["result"]["resources"] if resource["name"] == "Tea"]
    assert listed["uri"] == f"http://testserver{uri}"
    for sent in (f"http://testserver{uri}", f"http://testserver/articles/{slug}/"):
        _, body = rpc(client, "resources/read", {"uri": sent})
        assert body["result"]["contents"][0]["text"].startswith("# Tea\n"), (sent, body)
    # A percent-encoded NUL or broken UTF-8 is no document's path (a decoded NUL must not reach PostgreSQL).
    for sent in ("http://testserver/articles/a%00b/", "http://testserver/articles/%FF/", "http://testserver/%E6%97/"):
        response, body = rpc(client, "resources/read", {"uri": sent})
        assert response.status_code == 200
        assert body["error"]["code"] == -32002
