"""How NLWeb's ``/ask`` and ``/await`` appear in ``/openapi.json``: request and response shapes of NLWeb v0.54 as
this front door reads and writes them (nothing here is served)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse

from ..sse import EVENT_SCHEMA


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


OBJECT = {"type": "object"}
COMPONENTS: dict[str, dict[str, Any]] = {
    "NLWebAsk": {
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {
                "type": "object",
                "required": ["text"],
                "properties": {
                    "text": {"type": "string", "maxLength": 4096},
                    "itemType": {"type": "string"},
                    "capability": {"type": "string", "description": "Extension: invoke a MODE3 capability."},
                    "input": {"type": "object", "description": "Extension: the capability's structured input."},
                },
            },
            "prefer": {
                "type": "object",
                "properties": {"mode": {"type": "string"}, "streaming": {"type": "boolean"}},
            },
            "context": OBJECT,
            "meta": OBJECT,
        },
    },
    "NLWebAwait": {
        "type": "object",
        "required": ["promise_token"],
        "properties": {
            "promise_token": {"type": "string"},
            "action": {"type": "string", "enum": ["checkin", "cancel"]},
            "prefer": {
                "type": "object",
                "properties": {"response_format": {}, "mode": {"type": "string"}, "streaming": {"type": "boolean"}},
            },
            "meta": OBJECT,
        },
    },
    "NLWebResponse": {
        "type": "object",
        "description": "An NLWeb answer, elicitation, promise or failure; `_meta.response_type` says which.",
        "required": ["_meta"],
        "properties": {
            "_meta": {
                "type": "object",
                "required": ["response_type"],
                "properties": {"response_type": {"type": "string"}},
            },
            "results": {"type": "array", "items": OBJECT},
            "content": {"type": "array", "items": OBJECT},
            "structuredData": {"type": "array", "items": OBJECT},
            "elicitation": OBJECT,
            "promise": OBJECT,
            "error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
        },
    },
}


def _response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ref("NLWebResponse"), description=description)


FAILURES = {
    status: _response(description)
    for status, description in (
        (400, "Failure: a malformed request."),
        (401, "Failure: authentication required, or the credentials were refused."),
        (403, "Failure: the credentials may not do this."),
        (404, "Failure: no such promise or capability."),
        (413, "Failure: the body is over the size cap."),
        (429, "Failure: rate limit exceeded."),
    )
}


def _events(what: str) -> OpenApiResponse:
    return OpenApiResponse(
        EVENT_SCHEMA, description=f"With prefer.streaming or Accept: text/event-stream: {what} as events."
    )


ASK = {
    "operation_id": "nlweb_ask",
    "summary": "Ask in natural language, or invoke a capability (NLWeb v0.54 /ask)",
    "request": {"application/json": ref("NLWebAsk")},
    "responses": {
        200: _response("An answer, or an elicitation."),
        (200, "text/event-stream"): _events("the answer or the elicitation"),
        202: _response("A promise: an async capability's job, to await."),
        (202, "text/event-stream"): _events("the promise"),
        **FAILURES,
    },
    "tags": ["NLWeb"],
}
AWAIT = {
    "operation_id": "nlweb_await",
    "summary": "Check in on, or cancel, a promise (NLWeb v0.54 /await)",
    "request": {"application/json": ref("NLWebAwait")},
    "responses": {
        200: _response("The answer, or a failure."),
        (200, "text/event-stream"): _events("the answer or the failure"),
        202: _response("Still running."),
        (202, "text/event-stream"): _events("the promise"),
        **FAILURES,
    },
    "tags": ["NLWeb"],
}
