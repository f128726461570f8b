"""How the schema templates front door appears in ``/openapi.json`` (nothing here is served): the draft's template,
method call and structured submission, as :mod:`.views` reads and writes them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


KEY_TYPES = ["string", "integer", "number", "boolean", "array", "object"]
COMPONENTS: dict[str, dict[str, Any]] = {
    "SchemaKey": {
        "type": "object",
        "required": ["key_name", "key_type", "required", "semantic_description"],
        "properties": {
            "key_name": {"type": "string"},
            "key_type": {"type": "string", "enum": KEY_TYPES},
            "required": {"type": "boolean"},
            "default_value": {},
            "semantic_description": {"type": "string"},
            "lifecycle": {
                "type": "string",
                "enum": ["experimental", "stable", "proposed"],
                "description": "Extension: a key added from the differential semantic pool, and its phase.",
            },
        },
    },
    "SchemaTemplate": {
        "type": "object",
        "required": ["schema_id", "scenario", "keys"],
        "properties": {
            "schema_id": {"type": "string", "description": "<scenario>_v<version>; a new version when it changes."},
            "scenario": {"type": "string", "description": "The capability's name."},
            "keys": {"type": "array", "items": ref("SchemaKey")},
            "language": {"type": "string", "description": "Extension: the language of the descriptions."},
            "description": {"type": "string", "description": "Extension: what the scenario does."},
            "response_schema": {"type": "object", "description": "Extension: the JSON Schema of a result."},
        },
    },
    "SchemaTemplateRequest": {
        "description": "The draft's method call, or a structured submission.",
        "oneOf": [
            {
                "type": "object",
                "required": ["method", "params"],
                "additionalProperties": False,
                "properties": {
                    "method": {"type": "string", "enum": ["get_schema_template"]},
                    "params": {
                        "type": "object",
                        "required": ["scenario"],
                        "additionalProperties": False,
                        "properties": {
                            "scenario": {"type": "string"},
                            "preferred_language": {"type": "string", "maxLength": 35},
                        },
                    },
                },
            },
            {
                "type": "object",
                "required": ["schema_id", "payload"],
                "additionalProperties": False,
                "properties": {
                    "schema_id": {"type": "string"},
                    "payload": {"type": "object", "description": "key_name: value, as the template defines them."},
                    "callback_url": {"type": "string", "description": "Extension, async scenarios: where to post."},
                },
            },
        ],
    },
    "SchemaTemplateResult": {
        "type": "object",
        "description": "The template (method call), the capability's output (its response_schema), or an async "
        "job accepted (202: status, job_id, poll, eta_seconds).",
        "properties": {
            "schema_update_suggestion": {
                "type": "object",
                "properties": {"new_keys": {"type": "array", "items": ref("SchemaKey")}},
            },
        },
    },
    "SchemaTemplatesError": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "fields": {"type": "array", "items": {"type": "string"}},
                },
            }
        },
    },
    "SchemaScenarios": {
        "type": "object",
        "required": ["endpoint", "scenarios"],
        "properties": {
            "endpoint": {"type": "string"},
            "scenarios": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "scenario": {"type": "string"},
                        "schema_id": {"type": "string"},
                        "description": {"type": "string"},
                        "auth_required": {"type": "boolean"},
                        "url": {"type": "string"},
                    },
                },
            },
        },
    },
}


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ref("SchemaTemplatesError"), description=description)


ERRORS = {
    status: _error(description)
    for status, description in (
        (400, "A malformed body, an unknown key, a value of the wrong type, a missing required key."),
        (401, "Authentication required, or the credentials were refused."),
        (403, "The credentials may not do this."),
        (404, "No such scenario."),
        (413, "The body is over the size cap."),
        (422, "An Idempotency-Key reused for another request."),
        (429, "Rate limit exceeded."),
    )
}
TAGS = ["Schema templates"]
LIST = {
    "operation_id": "schema_templates_list",
    "summary": "The scenarios that have schema templates (one per MODE3 capability)",
    "responses": {200: OpenApiResponse(ref("SchemaScenarios"), description="The scenarios."), 429: ERRORS[429]},
    "tags": TAGS,
}
GET_TEMPLATE = {
    "operation_id": "schema_templates_get",
    "summary": "One scenario's schema template (draft-zhou-structured-data-schema-interaction §4.1)",
    "parameters": [
        OpenApiParameter("preferred_language", str, OpenApiParameter.QUERY, description="A BCP 47 tag, e.g. fr-CH."),
    ],
    "responses": {
        200: OpenApiResponse(ref("SchemaTemplate"), description="The template."),
        **{status: ERRORS[status] for status in (400, 404, 429)},
    },
    "tags": TAGS,
}
POST = {
    "operation_id": "schema_templates_post",
    "summary": "get_schema_template, or a structured submission run through the capability",
    "request": {"application/json": ref("SchemaTemplateRequest")},
    "responses": {
        200: OpenApiResponse(ref("SchemaTemplateResult"), description="The template, or the capability's output."),
        202: OpenApiResponse(ref("SchemaTemplateResult"), description="An async scenario's job, accepted."),
        **ERRORS,
    },
    "tags": TAGS,
}
