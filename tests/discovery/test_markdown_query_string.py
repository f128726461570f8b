"""Objects whose URLs differ only in their query string ("/page/?article=b") share one path: the markdown version
asked for at one of those URLs must be that object's, not the first of the path's, and a query no object has gets
the page itself."""

from __future__ import annotations

import pytest

import agent_handshake
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

MARKDOWN = {"Accept": "text/markdown"}


@pytest.fixture
def articles_by_query(publish, registries):
    content_registry, _ = registries

    class ArticleContent(agent_handshake.ContentConfig):
        title_field = "title"
        body_field = "body"

        def get_url(self, obj):
            return f"/page/?article={obj.slug}"

    content_registry.unregister(Article)
    content_registry.register(Article, ArticleContent)
    return [publish(Article, title=f"Article {slug}", slug=slug, body=f"Body of {slug}.") for slug in ("a", "b")]


def test_the_markdown_version_is_the_object_at_that_url(client, articles_by_query):
    for slug in ("a", "b"):
        response = client.get(f"/page/?article={slug}", headers=MARKDOWN)
        assert response.status_code == 200
        assert response["Content-Type"] == "text/markdown; charset=utf-8"
        text = response.content.decode()
        assert text.startswith(f"# Article {slug}\n"), text
        assert f"Body of {slug}." in text
        assert response["Link"].startswith(f'<http://testserver/page/?article={slug}>; rel="canonical"')


def test_a_query_no_object_has_gets_the_page_itself(client, articles_by_query):
    for url in ("/page/?article=c", "/page/", "/page/?article=%00"):
        response = client.get(url, headers=MARKDOWN)
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/html"), url
        assert "Plain page" in response.content.decode()


def test_a_query_is_ignored_for_objects_whose_url_has_none(client, publish):
    publish(Article, title="Tea", slug="tea", body="Tea.")
    response = client.get("/articles/tea/?utm_source=feed", headers=MARKDOWN)
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.content.decode().startswith("# Tea\n")
