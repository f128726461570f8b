"""A markdown version (``/articles/first.md``) is sent to any origin and exposes its ``ETag`` for ``If-None-Match``,
but a page that adds that header (or any other not safelisted) makes the browser send a CORS preflight first, and
the ``OPTIONS`` of ``<url>.md`` reached the site's own routes (here an HTML 404) with no CORS headers: the browser
refused the page the markdown. It now gets the preflight answer the documents give."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

PAGE = "https://page.example"


def names(header: str) -> list[str]:
    return [name.strip().lower() for name in header.split(",")]


@pytest.fixture
def article(publish):
    return publish(Article, title="First steeping", slug="first", body="Warm the pot first.")


def preflight(client: Client, path: str):
    return client.options(
        path,
        HTTP_ORIGIN=PAGE,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="if-none-match",
    )


def test_a_browsers_preflight_for_a_markdown_version_is_allowed(article):
    client = Client(enforce_csrf_checks=True)
    response = preflight(client, "/articles/first.md")
    assert response.status_code in (200, 204), response.content[:200]
    assert response["Access-Control-Allow-Origin"] == "*"
    assert names(response["Access-Control-Allow-Methods"]) == ["get", "head"]
    assert names(response["Access-Control-Allow-Headers"]) == ["if-none-match"]
    assert int(response["Access-Control-Max-Age"]) > 0
    assert response.content == b""
    assert "Content-Type" not in response
    # The GET the browser then sends, with the page's If-None-Match, is answered and readable.
    first = client.get("/articles/first.md", HTTP_ORIGIN=PAGE)
    assert first.status_code == 200
    again = client.get("/articles/first.md", HTTP_ORIGIN=PAGE, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert again["Access-Control-Allow-Origin"] == "*"


def test_a_preflight_for_a_path_with_no_markdown_version_is_the_sites(article):
    response = preflight(Client(), "/articles/nothing-here.md")
    assert response.status_code == 404
    assert "Access-Control-Allow-Origin" not in response
