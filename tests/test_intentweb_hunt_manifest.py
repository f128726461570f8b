"""A capability written the way Django apps write translatable text (``gettext_lazy``) made ``/intentmanifest.yaml``
a 500: PyYAML's safe dumper represents str, not Django's lazy strings. The manifest is for every agent, so one
such capability hid all the others."""

from __future__ import annotations

import pytest
import yaml
from django.utils.translation import gettext_lazy as _

pytestmark = pytest.mark.django_db


def test_a_capability_with_lazy_translated_text_is_published(client, demo_content, registries):
    from agent_handshake import Capability, Outcome

    registries[1].register(Capability(
        name="page_by_title", description=_("Find a page of the site by its title."), mode="MODE3",
        action_type="query", response_types=["application/data"], intent=_("Look up a page by its title"),
        examples=(_("Find the page about shading gyokuro"),), constraints=(_("One title at a time"),),
        notes=(_("Titles are matched exactly"),), handler=lambda invocation: Outcome({"found": True}, answer="Found."),
        input_schema={"type": "object", "required": ["title"],
                      "properties": {"title": {"type": "string", "description": _("The page's title")}}},
    ))  # fmt: skip
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
    # Every other capability is still there.
    assert {"check_inventory", "book_appointment"} <= {item["capability"] for item in manifest["capabilities"]}
