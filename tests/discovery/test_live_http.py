"""Discovery and caching over real HTTP: the project served by Django's live server on 127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.testapp.models import Article

pytestmark = pytest.mark.django_db(transaction=True)


def fetch(url: str, **headers: str):
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_manifest_and_conditional_get_over_http(live_server):
    status, headers, body = fetch(live_server.url + "/.well-known/agent.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["ahp"] == "0.1"
    status, _, body = fetch(live_server.url + "/.well-known/agent.json", **{"If-None-Match": headers["ETag"]})
    assert (status, body) == (304, b"")


def test_pages_errors_and_negotiation_over_http(live_server):
    Article.objects.create(title="Over the wire", slug="wire", body="Bytes on a socket.")
    from django.core.management import call_command

    call_command("agent_reindex", verbosity=0)

    status, headers, body = fetch(live_server.url + "/articles/wire/")
    assert status == 200
    assert 'rel="ahp-manifest agent-manifest"' in headers["Link"]
    assert b'aria-label="AI Agent Notice"' in body
    assert int(headers["Content-Length"]) == len(body)

    status, headers, body = fetch(live_server.url + "/missing/")
    assert status == 404
    assert b"ahp-notice" in body
    assert "agent-manifest" in headers["Link"]

    status, headers, body = fetch(live_server.url + "/articles/wire/", Accept="text/markdown")
    assert status == 200
    assert headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert body.decode().startswith("# Over the wire\n")

    status, headers, body = fetch(live_server.url + "/articles/wire/", Accept="application/agent+json")
    assert json.loads(body)["modes"] == ["MODE1", "MODE2", "MODE3"]
