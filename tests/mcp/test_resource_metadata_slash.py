"""RFC 9728 §3.3: the metadata a ``WWW-Authenticate`` challenge points at names, as its ``resource``, the very URL
the client used. ``/mcp/`` is served as ``/mcp`` (a client adding a slash is not sent to the site's pages), so its
challenge points at ``/.well-known/oauth-protected-resource/mcp/`` (§3.1), whose ``resource`` ends in ``/mcp/``: a
strict client at ``/mcp/`` refused the metadata naming ``/mcp``."""

from __future__ import annotations

import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_the_challenge_points_at_metadata_naming_the_url_used(path):
    client = Client()
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    response = client.post(path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION="Bearer nope")
    assert response.status_code == 401
    challenge = response["WWW-Authenticate"]
    url = challenge.split('resource_metadata="')[1].rstrip('"')
    assert url == "http://testserver/.well-known/oauth-protected-resource" + path
    metadata = client.get(url.removeprefix("http://testserver"))
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == "http://testserver" + path
