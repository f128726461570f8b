"""The RFC 9728 metadata (``/.well-known/oauth-protected-resource/mcp``) had no ``ETag`` and answered every
conditional request in full, unlike the site's other documents: a client (a browser MCP client, a crawler) fetched
it whole every time. It now has an ``ETag`` of its own on each URL and host, readable across origins, and answers
``If-None-Match`` (one, a list, a weak one, ``*``; on GET and HEAD) with 304."""

from __future__ import annotations

import pytest
from django.test import Client

from agent_handshake.models import SiteProfile
from tests.conftest import SERVED_HOST
from tests.discovery.test_cors_exposed_headers import METADATA, PAGE, readable

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return Client(enforce_csrf_checks=True)


def test_the_metadata_has_an_etag_a_page_can_read(client):
    response = client.get(METADATA, HTTP_ORIGIN=PAGE)
    assert response.status_code == 200
    assert response["ETag"].startswith('"')
    assert "etag" in readable(response)


@pytest.mark.parametrize(
    "if_none_match",
    ["{etag}", 'W/"other", {etag}', "W/{etag}", '"other",{weak}', "*"],
    ids=["same", "in-a-list", "weak", "weak-in-a-list", "any"],
)
@pytest.mark.parametrize("method", ["get", "head"])
def test_the_metadata_answers_if_none_match_with_304(client, method, if_none_match):
    first = client.get(METADATA)
    etag = first["ETag"]
    condition = if_none_match.format(etag=etag, weak="W/" + etag)
    response = getattr(client, method)(METADATA, HTTP_IF_NONE_MATCH=condition)
    assert response.status_code == 304, condition
    assert response.content == b""
    # The validator the client holds (a weak one stays weak: the discovery middleware's rule for a 304).
    assert response["ETag"].removeprefix("W/") == etag
    assert response["Cache-Control"] == first["Cache-Control"]
    assert response["Access-Control-Allow-Origin"] == "*"


def test_the_metadata_is_answered_in_full_when_it_changed(client, django_capture_on_commit_callbacks):
    first = client.get(METADATA)
    assert client.get(METADATA, HTTP_IF_NONE_MATCH='"something-else"').status_code == 200
    assert client.get(METADATA, HTTP_IF_MODIFIED_SINCE="not a date").status_code == 200  # ignored, as RFC 9110 says
    with django_capture_on_commit_callbacks(execute=True):
        SiteProfile.objects.create(name="Lantern & Kettle")  # the metadata's resource_name
    renamed = client.get(METADATA, HTTP_IF_NONE_MATCH=first["ETag"])
    assert renamed.status_code == 200
    assert renamed.json()["resource_name"] == "Lantern & Kettle"
    assert renamed["ETag"] != first["ETag"]


def test_each_metadata_url_and_host_has_its_own_etag(client, host_site):
    plain = client.get(METADATA)
    slashed = client.get(METADATA + "/")
    elsewhere = client.get(METADATA, HTTP_HOST=SERVED_HOST)
    assert plain.json()["resource"] != slashed.json()["resource"] != elsewhere.json()["resource"]
    assert len({plain["ETag"], slashed["ETag"], elsewhere["ETag"]}) == 3
    # A client that holds one host's metadata is not told it holds another's.
    again = client.get(METADATA, HTTP_HOST=SERVED_HOST, HTTP_IF_NONE_MATCH=plain["ETag"])
    assert again.status_code == 200
    assert again.json()["resource"] == f"http://{SERVED_HOST}/mcp"
