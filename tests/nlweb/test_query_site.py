"""NLWeb v0.54 §3.1 ``query.site``: "An agent may have 'sub corpora' and allow a request to specify which corpora
must be searched." This agent has one corpus, the site itself: a request naming it (its host, its ``BASE_URL``'s,
its profile's name, or ``all``, the upstream reference's word for every corpus) searches it; one naming only
another site gets what that corpus holds here, no results, and a warning, as an ``itemType`` the site has none of
does. It used to be answered from this site's content as if it were the other one's."""

from __future__ import annotations

import pytest

from tests.nlweb.test_nlweb import ask
from tests.nlweb_schema import assert_valid

pytestmark = pytest.mark.django_db

QUESTION = "green tea"


def site_name(client):
    return client.get("/.well-known/agent.json").json()["name"]


def test_a_site_that_is_not_this_one_has_no_results_here(client, demo_content):
    _, everything = ask(client, QUESTION)
    assert everything["results"]
    for site in ("pumpkins-r-us.com", ["breakfast-central.com", "healthy-meals.com"], "https://testserver.evil/"):
        response, body = ask(client, QUESTION, query={"site": site})
        assert_valid(body)
        assert response.status_code == 200
        assert body["_meta"]["response_type"] == "answer"
        assert body["results"] == [], site
        warning = body["_meta"]["warnings"][0]
        assert warning.startswith("query.site:")
        assert "testserver" in warning
        assert site_name(client) in warning
    response, body = ask(client, QUESTION, query={"site": "pumpkins-r-us.com"}, prefer={"streaming": True})
    assert body["results"] == []


def test_this_site_by_any_of_its_names_is_searched_whole(client, demo_content):
    _, everything = ask(client, QUESTION)
    urls = [result["url"] for result in everything["results"]]
    assert urls
    for site in ("testserver", "TestServer:80", "http://testserver/", "www.testserver", site_name(client).upper(),
                 "all", ["pumpkins-r-us.com", "testserver"]):  # fmt: skip
        _, body = ask(client, QUESTION, query={"site": site})
        assert [result["url"] for result in body["results"]] == urls, site
        assert "warnings" not in body["_meta"], site


def test_base_url_names_this_site_too(client, demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "BASE_URL": "https://tea.example"}
    _, body = ask(client, QUESTION, query={"site": "tea.example"})
    assert body["results"]
    assert "warnings" not in body["_meta"]


@pytest.mark.parametrize("site", [7, {"host": "testserver"}, ["testserver", 7]])
def test_a_site_that_is_not_text_is_refused(client, site):
    response, body = ask(client, QUESTION, query={"site": site})
    assert response.status_code == 400
    assert body["error"]["details"]["fields"] == ["query.site"]
