"""A capability written the way Django apps write translatable text (``gettext_lazy`` for its intent, description,
examples, notes and field descriptions) works through every front door: ``POST /intent`` routed a request with
such a capability registered into a 500 (the router's texts were not strings), hiding every capability from
IntentWeb agents. Each door reads the text in the request's language, as ``gettext_lazy`` means."""

from __future__ import annotations

import json

import pytest
import yaml
from django.utils.translation import gettext_lazy as _

from tests.intentweb.test_intentweb import Agent, key

pytestmark = pytest.mark.django_db


@pytest.fixture
def lazy_capability(registries):
    from agent_handshake import Capability, Outcome

    registries[1].register(Capability(
        name="page_by_title", description=_("Find a page of the site by its title."), mode="MODE3",
        action_type="query", response_types=["application/data"], intent=_("Look up a page by its title"),
        examples=(_("Find the page about shading gyokuro"),), constraints=(_("One title at a time"),),
        notes=(_("Titles are matched exactly"),), handler=lambda invocation: Outcome({"found": True}, answer="Found."),
        input_schema={"type": "object", "required": ["title"],
                      "properties": {"title": {"type": "string", "description": _("The page's title")}}},
    ))  # fmt: skip


def test_every_front_door_serves_a_capability_with_lazy_text(client, demo_content, lazy_capability):
    status, reply = Agent(client, secret=key()).send("intent_request", "Look up a page by its title")
    assert status < 500, reply
    assert reply["flow_type"] != "error", reply
    converse = client.post(
        "/agent/converse",
        json.dumps({"query": "How hot should the water be for gyokuro?"}),
        content_type="application/json",
    )
    assert converse.status_code == 200, converse.content[-300:]
    assert client.get("/llms.txt").status_code == 200
    for url in ("/.well-known/agent.json", "/openapi.json", "/intentmanifest.yaml"):
        response = client.get(url)
        assert response.status_code == 200, (url, response.content[-300:])
        assert "page_by_title" in response.content.decode(), url
    tools = client.post(
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        content_type="application/json",
    )
    assert tools.status_code == 200
    assert "page_by_title" in {tool["name"] for tool in tools.json()["result"]["tools"]}


def test_the_intent_manifest_publishes_lazy_text_as_text(client, demo_content, lazy_capability):
    """PyYAML's safe dumper represents str, not Django's lazy strings: the manifest was a 500, and one such
    capability hid every other from IntentWeb agents."""
    response = client.get("/intentmanifest.yaml")
    assert response.status_code == 200, response.content[-300:]
    manifest = yaml.safe_load(response.content)
    (entry,) = [item for item in manifest["capabilities"] if item.get("capability") == "page_by_title"]
    assert entry["intent"] == "Look up a page by its title"
    assert entry["description"] == "Find a page of the site by its title."
    assert entry["examples"] == ["Find the page about shading gyokuro"]
    assert entry["constraints"] == ["One title at a time"]
    assert entry["notes"] == ["Titles are matched exactly"]
    assert entry["requires"] == ["The page's title [title]"]
    assert {"check_inventory", "book_appointment"} <= {item["capability"] for item in manifest["capabilities"]}
