"""A markdown version names where the site is served (its ``URL:`` line and its ``Link: rel="canonical"``), built
from the request when ``BASE_URL`` is unset, as agent.json and llms.txt are. Their ETags carry the base URL; the
markdown version's did not: the same ETag on every host and scheme for different bytes, so a client (or a cache)
that kept one host's copy was answered 304 on another and kept links to the wrong host. Each host and scheme now has
its own."""

from __future__ import annotations

import pytest

from tests.conftest import SERVED_HOST
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

MARKDOWN = "/articles/first.md"


@pytest.fixture
def article(publish, host_site):
    return publish(Article, title="First steeping", slug="first", body="Warm the pot first.")


@pytest.mark.parametrize(
    "elsewhere",
    [{"HTTP_HOST": SERVED_HOST}, {"secure": True}, {"HTTP_HOST": SERVED_HOST, "secure": True}],
    ids=["another-host", "https", "another-host-https"],
)
@pytest.mark.parametrize(("path", "accept"), [(MARKDOWN, None), ("/articles/first/", "text/markdown")])
def test_each_host_has_its_own_markdown_etag(client, article, elsewhere, path, accept):
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    here = client.get(path, **headers)
    there = client.get(path, **headers, **elsewhere)
    assert here.status_code == there.status_code == 200
    assert here["Content-Type"].startswith("text/markdown")
    assert here.content != there.content  # the URL: line names the host
    assert here["ETag"] != there["ETag"]
    # A client that kept the first host's copy gets the other's in full, with its own links.
    again = client.get(path, HTTP_IF_NONE_MATCH=here["ETag"], **headers, **elsewhere)
    assert again.status_code == 200
    assert again.content == there.content
    assert again["Link"] == there["Link"]
    # And each host still answers its own validator with 304.
    assert client.get(path, HTTP_IF_NONE_MATCH=there["ETag"], **headers, **elsewhere).status_code == 304
    assert client.get(path, HTTP_IF_NONE_MATCH=here["ETag"], **headers).status_code == 304
