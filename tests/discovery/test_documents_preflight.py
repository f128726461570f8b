"""The public documents are sent to any origin (``Access-Control-Allow-Origin: *``), but a browser's CORS preflight
for them (a page sending ``If-None-Match``, or a browser MCP client fetching the RFC 9728 metadata with its
``MCP-Protocol-Version`` header) got an OPTIONS answer with no CORS headers, so the browser refused the page the
document; and that answer was an empty body labelled ``text/html``. A preflight now gets
``Access-Control-Allow-Origin: *``, the methods and the headers asked for, and no answer has a Content-Type for
its empty body."""

from __future__ import annotations

import pytest

from tests.discovery.test_cors_exposed_headers import DOCUMENTS

pytestmark = pytest.mark.django_db


def names(header: str) -> list[str]:
    return [name.strip().lower() for name in header.split(",")]


@pytest.mark.parametrize("path", DOCUMENTS)
def test_a_browsers_preflight_for_a_document_is_allowed(documents_client, path):
    response = documents_client.options(
        path,
        HTTP_ORIGIN="https://page.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="if-none-match,mcp-protocol-version",
    )
    assert response.status_code in (200, 204)
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "get" in names(response["Access-Control-Allow-Methods"])
    assert {"if-none-match", "mcp-protocol-version"} <= set(names(response["Access-Control-Allow-Headers"]))
    assert int(response["Access-Control-Max-Age"]) > 0
    assert response.content == b""
    assert "Content-Type" not in response
    # And the GET that follows is readable by that page, as before.
    got = documents_client.get(path, HTTP_ORIGIN="https://page.example")
    assert got.status_code == 200
    assert got["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize("path", DOCUMENTS)
def test_a_plain_options_says_allow_and_has_no_content_type(documents_client, path):
    response = documents_client.options(path)
    assert response.status_code == 200
    assert names(response["Allow"]) == ["get", "head", "options"]
    assert response.content == b""
    assert "Content-Type" not in response


def test_a_preflight_echoes_only_header_names(documents_client):
    """What the page asked for is echoed, but only what is a header name (no line breaks, commas, spaces)."""
    response = documents_client.options(
        "/llms.txt",
        HTTP_ORIGIN="https://page.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-ok, bad name, ",
    )
    assert names(response["Access-Control-Allow-Headers"]) == ["x-ok"]
