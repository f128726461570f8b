"""Schema templates as a client agent or an editor meets them: allowed values written as the user would say them (a
template already published escaped is republished unescaped), a key whose allowed values are numbers typed as a number,
every bound the schema checks described, a translation found however its editor wrote the tag, and the pending
proposals suggested in every result bounded.
The client side is written from draft-zhou-structured-data-schema-interaction-00 (§4.1, Appendix A)."""

from __future__ import annotations

import json

import pytest

from agent_handshake import Invocation, Outcome, capability
from tests.schema_templates.test_schema_templates import post, template

pytestmark = pytest.mark.django_db


def test_allowed_values_are_written_as_the_user_would_say_them(client, registries):
    """A semantic description is text an LLM reads (§4.2): an allowed value is written as it is, not as a JSON
    escape sequence an agent would have to decode (and might send back as written)."""

    @capability(
        description="Order a tea.",
        input_schema={"type": "object", "required": ["tea"], "properties": {
            "tea": {"type": "string", "description": "Which tea", "enum": ["Grüntee", "玉露", "Café \"noir\""]}}},
        output_schema={"type": "object"},
    )  # fmt: skip
    def order_tea(invocation: Invocation) -> Outcome:
        return Outcome({"tea": invocation.input["tea"]})

    (tea, _other) = template(client, "order_tea")["keys"]
    assert tea["semantic_description"] == 'Which tea. Acceptable values: "Grüntee", "玉露", "Café \\"noir\\"".'
    response, body = post(client, {"schema_id": "order_tea_v1", "payload": {"tea": "玉露"}})
    assert (response.status_code, body) == (200, {"tea": "玉露"})


def test_a_template_published_before_the_fix_is_republished_unescaped(client, registries):
    """A site upgraded with templates already published gets the unescaped text on first use, as a new version
    (its declaration did not change; how it is written did)."""
    import hashlib
    import json

    from agent_handshake.concierge.template_publishing import digest_of, forget
    from agent_handshake.models import SchemaTemplate

    @capability(
        description="Order a tea.",
        input_schema={"type": "object", "properties": {"tea": {"type": "string", "enum": ["Grüntee"]}}},
        output_schema={"type": "object"},
    )
    def order_tea(invocation: Invocation) -> Outcome:
        return Outcome({})

    declared = registries[1].get("order_tea")
    template(client, "order_tea")
    row = SchemaTemplate.objects.get(scenario="order_tea")
    escaped = {**row.published["keys"][0], "semantic_description": 'Tea. Acceptable values: "Gr\\u00fcntee".'}
    published = {**row.published, "keys": [escaped, row.published["keys"][1]]}  # as the earlier build wrote it
    before = [declared.description, declared.input_schema, declared.output_schema]  # the digest as it was
    row.published, row.digest = published, digest_of(published)
    row.source_digest = hashlib.sha256(json.dumps(before, sort_keys=True, default=str).encode()).hexdigest()
    row.save()
    forget("order_tea")  # as a new process starts, with nothing cached
    body = template(client, "order_tea")
    assert body["schema_id"] == "order_tea_v2"
    assert body["keys"][0]["semantic_description"] == 'Tea. Acceptable values: "Grüntee".'


@pytest.fixture
def tea(registries):
    @capability(
        description="Order a tea.",
        input_schema={"type": "object", "required": ["tea"], "properties": {"tea": {"type": "string"}}},
        output_schema={"type": "object"},
    )
    def order_tea(invocation: Invocation) -> Outcome:
        return Outcome({"tea": invocation.input["tea"]})

    return order_tea


@pytest.mark.parametrize("written", ["pt_BR", "PT_br"])
def test_a_translation_is_found_however_its_editor_wrote_the_tag(
    client, tea, written, django_capture_on_commit_callbacks
):
    """An editor who writes the language as Django's locale names do (pt_BR), or in capitals, has the translation
    served to an agent asking for pt-BR."""
    from agent_handshake.models import SchemaTemplate
    from tests.schema_templates.test_schema_templates import editor, inline_form

    template(client, "order_tea")
    row = SchemaTemplate.objects.get(scenario="order_tea")
    client.force_login(editor("view_schematemplate", "change_schematemplate", "add_schemakeytext",
                              "change_schemakeytext", "view_schemakeytext"))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/admin/agent_handshake/schematemplate/{row.pk}/change/",
                               inline_form("order_tea", [("tea", written, "Qual chá.")]))  # fmt: skip
    assert response.status_code == 302
    for asked in ("pt-BR", "pt_br", "PT-BR"):
        body = template(client, "order_tea", preferred_language=asked)
        assert (body["language"], body["keys"][0]["semantic_description"]) == ("pt-br", "Qual chá."), asked


def test_pending_proposals_suggested_in_every_result_are_bounded(client, tea, django_capture_on_commit_callbacks):
    """Every result of a scenario carries its pending proposals (Appendix A's schema_update_suggestion) until an
    editor decides: when proposals pile up (senders from a few networks can mature one cluster after another),
    each agent's answer must not grow with them. The best supported ones are suggested, a few at most."""
    from agent_handshake.models import ProposedField

    with django_capture_on_commit_callbacks(execute=True):
        made = [ProposedField.objects.create(capability="order_tea", name=f"wish_{n}", description="d", fragments=5,
                                             sources=3 + n % 7) for n in range(40)]  # fmt: skip
    response, body = post(client, {"schema_id": "order_tea_v1", "payload": {"tea": "sencha"}})
    assert response.status_code == 200, body
    suggested = [key["key_name"] for key in body["schema_update_suggestion"]["new_keys"]]
    best = sorted(made, key=lambda proposal: (-proposal.sources, proposal.pk))[:5]
    assert suggested == [f"proposed_key_{proposal.pk}" for proposal in best]
    assert len(json.dumps(body)) < 2000


def test_a_key_whose_allowed_values_are_numbers_is_a_number(client, registries):
    """Allowed values 0.5, 1 and 2 are JSON numbers (1 is an integer and a number): the template says number, so
    an agent sends 1, not "1" (which the enum refuses); so does a type that is integer or number."""

    @capability(
        description="Brew a tea.",
        input_schema={"type": "object", "required": ["strength"], "properties": {
            "strength": {"enum": [0.5, 1, 2]}, "litres": {"type": ["null", "integer", "number"]}}},
        output_schema={"type": "object"},
    )  # fmt: skip
    def brew_tea(invocation: Invocation) -> Outcome:
        return Outcome({"strength": invocation.input["strength"]})

    (strength, litres, _other) = template(client, "brew_tea")["keys"]
    assert (strength["key_type"], litres["key_type"]) == ("number", "number")
    response, body = post(client, {"schema_id": "brew_tea_v1", "payload": {"strength": 1}})
    assert (response.status_code, body) == (200, {"strength": 1})


def test_every_bound_the_schema_checks_is_described(client, registries):
    """A value the schema refuses for a bound (an exclusive one, a minimum length) is a 400 the agent could not
    have avoided: the description says every bound the schema checks."""

    @capability(
        description="Weigh a tea.",
        input_schema={"type": "object", "required": ["grams", "label"], "properties": {
            "grams": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 500},
            "label": {"type": "string", "minLength": 3, "maxLength": 8},
            "note": {"type": "string", "minLength": 2}}},
        output_schema={"type": "object"},
    )  # fmt: skip
    def weigh_tea(invocation: Invocation) -> Outcome:
        return Outcome({})

    grams, label, note, _other = (key["semantic_description"] for key in template(client, "weigh_tea")["keys"])
    assert (grams, label, note) == ("Grams. More than 0. Less than 500.", "Label. Between 3 and 8 characters.",
                                    "Note. At least 2 characters.")  # fmt: skip
    response, body = post(client, {"schema_id": "weigh_tea_v1", "payload": {"grams": 0, "label": "ab"}})
    assert (response.status_code, body["error"]["fields"]) == (400, ["payload.grams", "payload.label"])
