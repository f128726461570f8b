"""How AHP's endpoints appear in ``/openapi.json`` (Appendix E): the shared ``AHPResponse`` and ``AHPError``
schemas, the converse and status operations, and one ``POST /capabilities/<name>`` operation per capability, all
described from the registry and the request schema the endpoints validate with (nothing here is served)."""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import unquote

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentIdentity, ResolvedComponent
from drf_spectacular.utils import OpenApiResponse

from ..registry import Capability
from .request import REQUEST_SCHEMA

#: The body keys every capability operation takes (besides a MODE3 capability's input fields).
COMMON = ("query", "session_id", "clarification", "context")


def input_fields(capability: Capability) -> list[str]:
    """The MODE3 input fields a capability operation takes at the top level of its body."""
    if not capability.action_type or not capability.input_schema:
        return []
    return [name for name in (capability.input_schema.get("properties") or {}) if name not in (*COMMON, "auth")]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


STRINGS = {"type": "array", "items": {"type": "string"}}
COMPONENTS: dict[str, dict[str, Any]] = {
    "AHPResponse": {
        "type": "object",
        "description": "An AHP response (§6.2-§6.4): an answer, a clarification question, or an accepted job.",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["success", "clarification_needed", "accepted", "error"]},
            "session_id": {"type": ["string", "null"]},
            "response": {
                "type": "object",
                "properties": {
                    "content_type": {"type": "string"},
                    "answer": {"type": "string"},
                    "payload": {},
                    "sources": {"type": "array", "items": {"type": "object"}},
                    "follow_up": {"type": "object"},
                },
            },
            "clarification": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "options": {"type": ["array", "null"], "items": {"type": "string"}},
                    "free_form": {"type": "boolean"},
                },
            },
            "meta": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string"},
                    "cached": {"type": "boolean"},
                    "tokens_used": {"type": "integer"},
                    "capability_used": {"type": "string"},
                    "content_type": {"type": "string"},
                },
            },
            "eta_seconds": {"type": ["integer", "null"]},
            "poll": {"type": "string", "description": "The status URL of an accepted job (GET, same credentials)."},
            "callback": {"type": "object"},
        },
    },
    "AHPError": {
        "type": "object",
        "description": "An AHP error (§10): a stable code, a message, and the fields it concerns.",
        "required": ["status", "code", "message"],
        "properties": {
            "status": {"const": "error"},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "fields": STRINGS,
            "retry_after": {"type": ["integer", "null"]},
            "available_capabilities": STRINGS,
        },
    },
    "AHPJobStatus": {
        "type": "object",
        "description": "An async job's status (§9.2).",
        "required": ["status", "session_id"],
        "properties": {
            "status": {"type": "string", "enum": ["pending", "success", "failed", "expired"]},
            "session_id": {"type": "string"},
            "eta_seconds": {"type": ["integer", "null"]},
            "progress": {"type": ["string", "null"]},
            "response": {"type": "object"},
            "meta": {"type": "object"},
            "error": {"type": "object"},
        },
    },
    "AHPRequest": REQUEST_SCHEMA,
}


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ref("AHPError"), description=description)


ERRORS = {
    400: error("Bad request: a malformed body, a missing or invalid field (named in `fields`)."),
    401: error("Authentication required, or the credentials were refused."),
    403: error("The API key lacks the capability's scope."),
    404: error("Not found."),
    413: error("The body is over the size cap."),
    429: error("Rate limit exceeded: see Retry-After and the X-RateLimit-* headers."),
}
CONVERSE = {
    "operation_id": "ahp_converse",
    "summary": "Ask a question or invoke a capability (AHP §6)",
    "request": {"application/json": ref("AHPRequest")},
    "responses": {
        200: OpenApiResponse(ref("AHPResponse"), description="An answer or a clarification question."),
        202: OpenApiResponse(ref("AHPResponse"), description="An async capability's job was accepted: poll it."),
        **ERRORS,
        410: error("The session has expired."),
        422: error("The Idempotency-Key was used for a different request."),
    },
    "tags": ["AHP"],
}
KEYS = [{"bearerAuth": []}, {"ahpKey": []}, {"signedRequest": []}]
STATUS = {
    "operation_id": "ahp_job_status",
    "summary": "An async job's status (AHP §9.2); readable with the credentials that started it",
    "auth": KEYS,
    "responses": {200: OpenApiResponse(ref("AHPJobStatus"), description="The job's status."), **ERRORS},
    "tags": ["AHP"],
}
ASYNC_NOTE = (
    " It runs asynchronously: the answer is `202` with `status: accepted`, the job's `session_id` and a `poll` URL; "
    "GET that URL with the same credentials until the status is `success` (the result), `failed` or `expired`, or "
    "pass `context.callback_url` to have the result POSTed, signed, when it is ready."
)


#: Where a JSON Schema keeps the definitions its "#/..." references name: 2020-12's $defs, draft-07's definitions.
LOCAL_DEFINITIONS = ("$defs", "definitions")


def lifted(schema: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``schema`` without its local definitions, and those as components named ``<prefix>.<name>``, with every
    "#/$defs/<name>..." reference in either pointing at the component instead.

    In /openapi.json a "#/..." reference resolves against the document, where a capability's own $defs are not
    (pydantic's ``model_json_schema()`` writes them for every nested model): copied as they were, they pointed
    nowhere and made the document invalid. A component may refer to itself, so recursive definitions stay valid.
    """
    schema = copy.deepcopy(schema)
    components: dict[tuple[str, str], str] = {}
    definitions: dict[str, Any] = {}
    for keyword in LOCAL_DEFINITIONS:
        found = schema.get(keyword)
        if not isinstance(found, dict):
            continue
        del schema[keyword]
        for name, definition in found.items():
            # Component names are [A-Za-z0-9._-]+; a name that clashes once cleaned gets a number.
            base = re.sub(r"[^A-Za-z0-9._-]", "_", f"{prefix}.{name}")
            component, n = base, 1
            while component in definitions:
                n += 1
                component = f"{base}_{n}"
            components[keyword, name] = component
            definitions[component] = definition

    def pointed(node: Any) -> Any:
        if isinstance(node, list):
            return [pointed(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: pointed(value) for key, value in node.items()}
        target = node.get("$ref")
        if isinstance(target, str) and target.startswith("#/"):
            keyword, _, rest = target[2:].partition("/")
            name, slash, tail = rest.partition("/")
            # A JSON pointer in a URI fragment: percent-encoded, with "~1" for "/" and "~0" for "~".
            name = unquote(name).replace("~1", "/").replace("~0", "~")
            if (keyword, name) in components:
                node["$ref"] = f"#/components/schemas/{components[keyword, name]}{slash}{tail}"
        return node

    return pointed(schema), {component: pointed(definition) for component, definition in definitions.items()}


def capability_components(capability: Capability) -> dict[str, Any]:
    """The local definitions of the capability's input and output schemas, as OpenAPI components."""
    components: dict[str, Any] = {}
    for part, schema in (("input", capability.input_schema), ("output", capability.output_schema)):
        if schema:
            components.update(lifted(schema, f"{capability.name}.{part}")[1])
    return components


def capability_request(capability: Capability) -> dict[str, Any]:
    """The flat body of ``POST /capabilities/<name>``."""
    properties: dict[str, Any] = {
        "query": {**REQUEST_SCHEMA["properties"]["query"], "description": "What you want, in natural language."},
        "session_id": {
            "type": ["string", "null"],
            "maxLength": 128,
            "description": "Optional: continue an earlier conversation.",
        },
        "clarification": {
            "type": ["string", "null"],
            "maxLength": 1024,
            "description": "Your answer to a clarification question.",
        },
        "context": REQUEST_SCHEMA["properties"]["context"],
        "auth": {
            **REQUEST_SCHEMA["properties"]["auth"],
            "description": "Optional: `Bearer <API key>`, for clients that cannot set headers (headers come first).",
        },
    }
    fields = input_fields(capability)
    if fields:
        input_schema = lifted(capability.input_schema or {}, f"{capability.name}.input")[0]
        for name in fields:
            properties[name] = input_schema["properties"][name]
    assert set(COMMON) <= set(properties)
    return {"type": "object", "required": ["query"], "properties": properties, "additionalProperties": False}


def capability_response(capability: Capability) -> dict[str, Any]:
    """``AHPResponse``, with the capability's ``output_schema`` where it has one: the payload's ``data``
    (``application/data``) or ``result`` (``application/action-result``), whichever the answer's type carries."""
    if not capability.output_schema:
        return ref("AHPResponse")
    schema = lifted(capability.output_schema, f"{capability.name}.output")[0]
    payload = {"properties": {"data": schema, "result": schema}}
    typed = {"properties": {"response": {"properties": {"payload": payload}}}}
    return {"allOf": [ref("AHPResponse"), typed]}


class CapabilityOperation(AutoSchema):
    """One capability as ``POST /capabilities/<name>`` (the view instance carries it as
    ``documented_capability``; see :mod:`agent_handshake.openapi`)."""

    @property
    def capability(self) -> Capability:
        return self.view.documented_capability

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        if self.view.documented_capability is None:  # the path's {name} pattern, not one capability: no operation
            return None
        # The definitions the request and response schemas refer to (see lifted).
        for name, schema in capability_components(self.capability).items():
            component = ResolvedComponent(name, ResolvedComponent.SCHEMA, schema=schema, object=ComponentIdentity(name))
            self.registry.register_on_missing(component)
        operation = super().get_operation(*args, **kwargs)
        if operation is not None and "requestBody" in operation:
            operation["requestBody"]["required"] = True
        return operation

    def get_operation_id(self) -> str:
        return self.capability.name

    def get_summary(self) -> str:
        return self.capability.description

    def get_description(self) -> str:
        capability = self.capability
        text = f"{capability.mode} capability `{capability.name}`"
        text += f" ({capability.action_type})." if capability.action_type else "."
        if capability.requires_auth:
            text += " Requires an API key" + (f" with the scope `{capability.scope}`." if capability.scope else ".")
        if capability.action_type == "async":
            text += ASYNC_NOTE
        return text

    def get_tags(self) -> list[str]:
        return ["capabilities"]

    def get_request_serializer(self) -> Any:
        return {"application/json": capability_request(self.capability)}

    def get_response_serializers(self) -> Any:
        capability = self.capability
        success = OpenApiResponse(capability_response(capability), description="The capability's answer.")
        # Every capability takes a session_id, and answers one that has gone idle too long with 410 (as converse).
        responses: dict[int, Any] = {200: success, **ERRORS, 410: CONVERSE["responses"][410]}
        if capability.action_type == "async":
            responses[202] = OpenApiResponse(ref("AHPResponse"), description="Accepted: poll the job.")
        if capability.action_type:
            responses[422] = error("The Idempotency-Key was used for a different request.")
        return responses

    def get_auth(self) -> list[dict[str, list[Any]]]:
        auths = super().get_auth()
        return [auth for auth in auths if auth] if self.capability.requires_auth else auths
