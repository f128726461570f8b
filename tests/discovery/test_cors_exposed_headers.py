"""What a page on another origin can read of the public documents (agent.json, llms.txt, llms-full.txt, robots.txt,
intentmanifest.yaml, openapi.json, the RFC 9728 metadata and the markdown versions). They are sent with
``Access-Control-Allow-Origin: *``, but a browser lets a page read only the CORS-safelisted response headers unless
``Access-Control-Expose-Headers`` names the others: their ``ETag`` (for ``If-None-Match``), ``Content-Signal`` and
``Link`` were hidden from it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.mcp.test_resources_and_browser_origins import SAFELISTED_RESPONSE
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

METADATA = "/.well-known/oauth-protected-resource/mcp"
DOCUMENTS = [
    "/.well-known/agent.json",
    "/llms.txt",
    "/llms-full.txt",
    "/robots.txt",
    "/intentmanifest.yaml",
    "/openapi.json",
    METADATA,
]
MARKDOWN = "/articles/first.md"
PAGE = "https://page.example"
#: The agent-facing headers the README promises on the documents.
AGENT_HEADERS = ("ETag", "Content-Signal", "Link")


def readable(response) -> set[str]:
    """The names of the headers a page on another origin can read of ``response`` (lower case), as a browser
    decides: none unless the origin is allowed, else the safelisted ones and those exposed."""
    if response.get("Access-Control-Allow-Origin") not in ("*", PAGE):
        return set()
    exposed = {name.strip().lower() for name in response.get("Access-Control-Expose-Headers", "").split(",")}
    return {name.lower() for name in response.headers if name.lower() in SAFELISTED_RESPONSE | exposed}


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def client(settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "SERVE_ROBOTS_TXT": True}
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def article(publish):
    return publish(Article, title="First steeping", slug="first", body="Warm the pot first.")


@pytest.mark.parametrize("path", [*DOCUMENTS, MARKDOWN])
def test_a_page_on_another_origin_can_read_the_agent_headers(client, article, path):
    response = client.get(path, HTTP_ORIGIN=PAGE)
    assert response.status_code == 200
    sent = [name for name in AGENT_HEADERS if name in response]
    assert {"Content-Signal", "Link"} <= set(sent)
    assert {name.lower() for name in sent} <= readable(response), response.get("Access-Control-Expose-Headers")
    if "ETag" in response:  # and its 304 says so too, as a browser revalidating for the page sees it
        again = client.get(path, HTTP_ORIGIN=PAGE, HTTP_IF_NONE_MATCH=response["ETag"])
        assert again.status_code == 304
        assert {"etag", "content-signal", "link"} <= readable(again)
