"""A JSON Schema of NLWeb v0.54 responses, written from §4 of the NLWeb v0.54 specification (it publishes none;
the examples it comes with are in tests/data/nlweb-v054/): ``_meta`` with ``response_type`` and ``version``
always; then the body of that type. Result objects are schema.org typed objects (``@type``), with optional
``grounding`` (object) and ``actions`` (§7's shape)."""

from __future__ import annotations

import jsonschema

ACTION = {
    "type": "object",
    "required": ["@type", "name", "description", "protocol", "method", "endpoint", "params"],
    "properties": {
        "@type": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "protocol": {"type": "string"},
        "method": {"enum": ["GET", "POST"]},
        "endpoint": {"type": "string", "format": "uri", "pattern": "^https?://"},
        "params": {"type": "object"},
    },
}
RESULT = {
    "type": "object",
    "required": ["@type"],
    "properties": {
        "@type": {"type": "string", "minLength": 1},
        "grounding": {"type": "object"},
        "actions": {"type": "array", "items": ACTION},
    },
}
META = {
    "type": "object",
    "required": ["response_type", "version"],
    "properties": {
        "response_type": {"enum": ["answer", "elicitation", "promise", "failure"]},
        "version": {"type": "string"},
        "session_context": {"type": "object"},
    },
}


def _body(response_type: str, required: list[str], properties: dict) -> dict:
    meta = {**META, "properties": {**META["properties"], "response_type": {"const": response_type}}}
    return {"type": "object", "required": ["_meta", *required], "properties": {"_meta": meta, **properties}}


RESPONSE = {
    "oneOf": [
        _body("answer", ["results"], {"results": {"type": "array", "items": RESULT}}),
        _body(
            "answer",
            ["content", "structuredData"],
            {
                "content": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["type", "text"],
                        "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                    },
                },
                "structuredData": {"type": "array", "items": RESULT},
            },
        ),
        _body(
            "elicitation",
            ["elicitation"],
            {
                "elicitation": {
                    "type": "object",
                    "required": ["text"],
                    "properties": {
                        "text": {"type": "string"},
                        "questions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["id", "text", "type"],
                                "properties": {
                                    "type": {"enum": ["text", "single_select", "multi_select"]},
                                    "options": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    },
                }
            },
        ),
        _body(
            "promise",
            ["promise"],
            {
                "promise": {
                    "type": "object",
                    "required": ["token"],
                    "properties": {"token": {"type": "string"}, "estimated_time": {"type": ["number", "null"]}},
                }
            },
        ),
        _body(
            "failure",
            ["error"],
            {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {"code": {"type": "string", "pattern": "^[A-Z_]+$"}, "message": {"type": "string"}},
                }
            },
        ),
    ]
}
VALIDATOR = jsonschema.Draft7Validator(RESPONSE, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def assert_valid(body: dict) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(body)]
    assert not errors, (errors[:3], body)
