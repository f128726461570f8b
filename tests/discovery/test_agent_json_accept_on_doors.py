"""``Accept: application/agent+json`` asks any page for the manifest (§3.2), but a protocol endpoint answers every
request itself, in its own protocol: the middleware served the manifest instead on every door but /agent/converse
and the status URL (``GET /schema-templates``, ``GET /agent/converse/`` with the slash, ``GET /mcp``...)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

AGENT_JSON = {"Accept": "application/agent+json"}

#: (path, the status its own view answers a GET with)
DOORS = [
    ("/agent/converse/", 405),
    ("/agent/handshake", 405),
    ("/agent/handshake/verify/", 405),
    ("/agent/asp", 405),
    ("/capabilities/content_search", 405),
    ("/ask", 405),
    ("/await/", 405),
    ("/mcp", 405),
    ("/mcp/", 405),
    ("/intent", 405),
    ("/schema-templates", 200),
    ("/schema-templates/", 200),
    ("/schema-templates/check_inventory", 200),
]


def is_manifest(response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("ahp") == "0.1" and "capabilities" in body


def comparable(response) -> object:
    body = response.json()
    if isinstance(body, dict):  # IntentWeb signs each answer afresh (its own nonce)
        body.pop("attribution", None)
    return body


@pytest.mark.parametrize(("path", "status"), DOORS, ids=[door[0] for door in DOORS])
def test_an_agent_json_get_on_a_door_is_answered_by_that_door(demo_content, path, status):
    client = Client(enforce_csrf_checks=True)
    plain = client.get(path)
    asked = client.get(path, headers=AGENT_JSON)
    assert asked.status_code == plain.status_code == status, asked.content[:200]
    assert not is_manifest(asked)
    assert comparable(asked) == comparable(plain)
    assert asked["Link"] == plain["Link"]  # the middleware still names the manifest


@pytest.mark.parametrize("path", ["/page/", "/intent-ui/", "/llms.txt", "/no-such-page/"])
def test_other_urls_still_answer_an_agent_json_get_with_the_manifest(demo_content, path):
    response = Client().get(path, headers=AGENT_JSON)
    assert response.status_code == 200
    assert is_manifest(response)
