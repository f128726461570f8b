"""Editors' key texts: a text in the site's own language is the default text (a "translation" into it was served or
not depending on whether the agent sent preferred_language, both labelled with the same language), and a template
whose capability is gone is guarded as ``guarded()`` guards its proposed keys."""

from __future__ import annotations

import json

import pytest

from agent_handshake.concierge import template_publishing
from agent_handshake.models import SchemaKeyText, SchemaTemplate
from agent_handshake.registry import capability_registry
from tests.schema_templates.test_schema_templates import editor, inline_form

pytestmark = pytest.mark.django_db

EDITOR = ("view_schematemplate", "change_schematemplate", "add_schemakeytext", "change_schemakeytext",
          "view_schemakeytext", "delete_schemakeytext")  # fmt: skip


def served(client, scenario: str, language: str | None = None) -> tuple[str, dict[str, str]]:
    params = {"scenario": scenario} | ({"preferred_language": language} if language else {})
    body = {"method": "get_schema_template", "params": params}
    response = client.post("/schema-templates", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    answer = response.json()
    return answer["language"], {key["key_name"]: key["semantic_description"] for key in answer["keys"]}


@pytest.mark.parametrize("language", ["en-us", "EN_us", "en-US"])
def test_a_text_in_the_sites_own_language_is_refused_as_a_translation(client, demo_content, settings, language):
    assert settings.LANGUAGE_CODE == "en-us"
    client.force_login(editor(*EDITOR))
    row = template_publishing.current(capability_registry.get("check_inventory"))
    response = client.post(f"/admin/agent_handshake/schematemplate/{row.pk}/change/",
                           inline_form("check_inventory", [("product", language, "The SKU.")]))  # fmt: skip
    assert response.status_code == 200
    assert "leave the language blank" in response.content.decode()
    assert not SchemaKeyText.objects.exists()


def test_a_stored_text_in_the_sites_own_language_is_served_with_or_without_preferred_language(client, demo_content):
    row = template_publishing.current(capability_registry.get("check_inventory"))
    SchemaKeyText.objects.create(template=row, key_name="product", language="en-us", semantic_description="The SKU.")
    plain = served(client, "check_inventory")
    asked = served(client, "check_inventory", "en-US")
    assert plain == asked
    assert plain[0] == "en-us"
    assert plain[1]["product"] == "The SKU."


def test_a_template_whose_capability_is_gone_takes_the_security_permission(client, demo_content, registries):
    row = template_publishing.current(capability_registry.get("check_inventory"))
    text = SchemaKeyText.objects.create(template=row, key_name="product", semantic_description="The SKU.")
    capability_registry.unregister("check_inventory")
    url = f"/admin/agent_handshake/schematemplate/{row.pk}/change/"
    data = inline_form("check_inventory", [("product", "", "Anything at all.")])
    data |= {"texts-INITIAL_FORMS": "1", "texts-0-id": str(text.pk), "texts-0-template": str(row.pk)}
    client.force_login(editor(*EDITOR))
    response = client.post(url, data)
    assert response.status_code == 200
    assert "security-relevant" in response.content.decode()
    text.refresh_from_db()
    assert text.semantic_description == "The SKU."
    # Someone with the permission may.
    client.force_login(editor(*EDITOR, "change_security_keys", name="lead"))
    assert client.post(url, data).status_code == 302
    text.refresh_from_db()
    assert text.semantic_description == "Anything at all."
    assert SchemaTemplate.objects.filter(pk=row.pk).exists()
