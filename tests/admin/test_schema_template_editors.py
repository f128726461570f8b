"""The schema-template screens editors use: each page checks against its own template's keys, and a key agents were
told of cannot be deleted, only retired."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory

from agent_handshake.models import ProposedField, SchemaTemplate
from agent_handshake.registry import capability_registry
from agent_handshake.schema_templates import templates as schema_templates
from tests.schema_templates.test_schema_templates import echo, editor  # noqa: F401  (echo is a fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agent_handshake/proposedfield/"


def test_two_editors_pages_each_check_their_own_templates_keys(demo_content):
    """Two editors on a threaded server: the second page's keys were set on the one form field every page shares,
    so the first editor's texts were checked against (and offered) the other template's keys."""
    rows = {
        scenario: SchemaTemplate.objects.get(pk=schema_templates.current(capability_registry.get(scenario)).pk)
        for scenario in ("check_inventory", "book_appointment")
    }
    model_admin = admin.site._registry[SchemaTemplate]
    request = RequestFactory().get("/admin/")
    request.user = User.objects.create_superuser("root", "root@example.com", "x")
    formsets = {}
    for scenario, row in rows.items():  # both pages built before either is used
        inline = model_admin.get_inline_instances(request, row)[0]
        formsets[scenario] = inline.get_formset(request, row)
    for scenario, row in rows.items():
        keys = {key["key_name"] for key in row.published["keys"]}
        form = formsets[scenario](instance=row).forms[0]
        assert {name for name, _ in form.fields["key_name"].choices} == keys
        other = next(name for name in {k["key_name"] for r in rows.values() for k in r.published["keys"]} - keys)
        data = {"key_name": other, "language": "", "semantic_description": "A text."}
        bound = formsets[scenario].form(data=data, instance=None)
        assert not bound.is_valid()
        assert "key_name" in bound.errors  # another template's key is no choice here


@pytest.mark.parametrize("status", ["experimental", "stable", "retired"])
def test_a_key_agents_were_told_of_cannot_be_deleted(admin_client, echo, status):  # noqa: F811
    """Deleting a published (or once published) key took it out of the template with its counts and decision, and
    let its fragments loose, so the pool proposed the same name again: it is retired, not deleted."""
    proposal = ProposedField.objects.create(capability="plan_picnic", name="window_seat", description="d",
                                            fragments=6, sources=3, status=status, filled=4)  # fmt: skip
    assert admin_client.get(f"{CHANGELIST}{proposal.pk}/delete/").status_code == 403
    response = admin_client.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [proposal.pk],
                                              "post": "yes"})  # fmt: skip
    assert response.status_code in (200, 302, 403)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.filled) == (status, 4)
    page = admin_client.get(f"{CHANGELIST}{proposal.pk}/change/").content.decode()
    assert "Delete" not in page.split("submit-row")[-1]


@pytest.mark.parametrize("status", ["pending", "rejected"])
def test_a_key_never_published_can_be_deleted(admin_client, echo, status):  # noqa: F811
    proposal = ProposedField.objects.create(capability="plan_picnic", name="window_seat", description="d",
                                            fragments=6, sources=3, status=status)  # fmt: skip
    page = admin_client.get(f"{CHANGELIST}{proposal.pk}/change/").content.decode()
    assert "Delete" in page.split("submit-row")[-1]
    response = admin_client.post(f"{CHANGELIST}{proposal.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not ProposedField.objects.filter(pk=proposal.pk).exists()
