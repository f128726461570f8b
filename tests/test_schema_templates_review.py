"""Schema templates, reviewed: defects a client agent or an editor would hit, each with the test that showed it.
The client side is written from draft-zhou-structured-data-schema-interaction-00 (§4.1, Appendix A)."""

from __future__ import annotations

import pytest

from agent_handshake import Invocation, Outcome, capability
from tests.test_schema_templates import post, template

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

    from agent_handshake.models import SchemaTemplate
    from agent_handshake.schema_templates.templates import digest_of, forget

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
