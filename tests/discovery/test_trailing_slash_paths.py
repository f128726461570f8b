"""Each door's path with one trailing slash is the same endpoint: ``POST /ask/`` is ``POST /ask``, never the site's
HTML 404 (nor, with CSRF enforced as a real agent meets it, Django's HTML 403 from a page route of the site).

The app is included at the root, before the site's own routes (the demo site's pages are ``<slug:slug>/``): the
slash variant was left to them, so an agent whose client adds a slash got a page meant for people. The manifests
and ``/openapi.json`` still name each path once, without the slash, as ``reverse()`` gives it.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

#: (path, a body, the protocol's error shape): a body each door refuses in its own terms, as it does without the slash.
POST_DOORS = [
    ("/agent/converse", {}, "ahp"),
    ("/agent/handshake", {}, "ahp"),
    ("/agent/handshake/verify", {}, "ahp"),
    ("/capabilities/content_search", {}, "ahp"),
    ("/ask", {}, "nlweb"),
    ("/await", {}, "nlweb"),
    ("/intent", {}, "intentweb"),
    ("/schema-templates", {"method": "nope"}, "schema_templates"),
    ("/mcp", {"jsonrpc": "2.0", "id": 1}, "mcp"),
]


def protocol_of(body: dict) -> str:
    """Which protocol's error shape ``body`` has."""
    if body.get("status") == "error" and "code" in body:
        return "ahp"
    if body.get("_meta", {}).get("response_type") == "failure":
        return "nlweb"
    if body.get("flow_type") == "error":
        return "intentweb"
    if body.get("jsonrpc") == "2.0":
        return "mcp"
    if isinstance(body.get("error"), dict):
        return "schema_templates"
    return "unknown"


def agent() -> Client:
    """A client as an agent is: no CSRF cookie nor token (Django's test client skips the check unless asked)."""
    return Client(enforce_csrf_checks=True)


def post(client: Client, path: str, body: dict):
    headers = {"Accept": "application/json, text/event-stream"} if path.startswith("/mcp") else {}
    return client.post(path, json.dumps(body), content_type="application/json", headers=headers)


def comparable(response) -> tuple[int, str, object]:
    body = response.json()
    if isinstance(body, dict) and isinstance(body.get("attribution"), dict):
        body = {key: value for key, value in body.items() if key != "attribution"}  # signed afresh each time
    return response.status_code, response["Content-Type"], body


@pytest.mark.parametrize("append_slash", [True, False])
@pytest.mark.parametrize(("path", "body", "protocol"), POST_DOORS, ids=[door[0] for door in POST_DOORS])
def test_a_post_to_a_door_with_a_trailing_slash_is_served_by_that_door(settings, path, body, protocol, append_slash):
    settings.APPEND_SLASH = append_slash
    plain = post(agent(), path, body)
    slashed = post(agent(), path + "/", body)
    assert slashed["Content-Type"].startswith("application/json"), slashed.content[:200]
    assert 400 <= slashed.status_code < 500
    assert protocol_of(slashed.json()) == protocol
    assert comparable(slashed) == comparable(plain)


WRONG_METHOD_DOORS = [
    ("/agent/converse/", "ahp", "POST"),
    ("/agent/handshake/verify/", "ahp", "POST"),
    ("/capabilities/content_search/", "ahp", "POST"),
    ("/ask/", "nlweb", "POST"),
    ("/await/", "nlweb", "POST"),
    ("/intent/", "intentweb", "POST"),
    ("/mcp/", "mcp", "POST"),
    ("/schema-templates/check_inventory/", "schema_templates", "GET"),
]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize(("path", "protocol", "allowed"), WRONG_METHOD_DOORS, ids=[d[0] for d in WRONG_METHOD_DOORS])
def test_a_wrong_method_on_a_slashed_door_is_that_protocols_405(path, protocol, allowed, method):
    if method == "GET" and allowed == "GET":
        method = "POST"
    response = agent().generic(method, path, b"{}", content_type="application/json")
    assert response.status_code == 405, response.content[:200]
    assert response["Content-Type"].startswith("application/json")
    assert protocol_of(response.json()) == protocol
    assert allowed in [name.strip() for name in response["Allow"].split(",")]


def test_the_slashed_read_paths_answer_as_the_plain_ones(demo_content):
    client = agent()
    listing = client.get("/schema-templates/")
    assert listing.status_code == 200
    assert listing.json() == client.get("/schema-templates").json()
    template = client.get("/schema-templates/check_inventory/")
    assert template.status_code == 200
    assert template.json() == client.get("/schema-templates/check_inventory").json()
    method_call = {"method": "get_schema_template", "params": {"scenario": "check_inventory"}}
    asked = post(client, "/schema-templates/", method_call)
    assert asked.status_code == 200
    assert asked.json()["scenario"] == "check_inventory"


def test_an_nlweb_question_at_ask_slash_is_answered(demo_content):
    response = post(agent(), "/ask/", {"query": {"text": "How do I brew gyokuro?"}})
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["_meta"]["response_type"] == "answer"
    assert body["results"]


def test_the_paths_are_named_once_without_the_slash():
    """The slash variant is served, not published: reverse(), the manifest and the OpenAPI document name each path
    as before."""
    assert reverse("agent_handshake:nlweb_ask") == "/ask"
    assert reverse("agent_handshake:capability", args=["content_search"]) == "/capabilities/content_search"
    assert reverse("agent_handshake:schema_template", args=["check_inventory"]) == "/schema-templates/check_inventory"
    paths = Client().get("/openapi.json").json()["paths"]
    assert "/ask" in paths
    assert "/capabilities/{name}" not in paths
    assert [path for path in paths if path.endswith("/")] == []
    manifest = Client().get("/.well-known/agent.json").json()
    assert manifest["endpoints"]["converse"] == "/agent/converse"
    assert manifest["integrations"]["mcp"]["url"] == "/mcp"
