"""How IntentWeb's ``POST /intent`` and ``/intentmanifest.yaml`` appear in ``/openapi.json`` (nothing here is
served): the request is :data:`.envelope.SCHEMA`, the response the same envelope as the site sends it."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.utils import OpenApiResponse

from .envelope import SCHEMA


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


STRING_LIST = {"type": "array", "items": {"type": "string"}}
RESPONSE = copy.deepcopy(SCHEMA)
RESPONSE["properties"].update(
    {
        "required_information": {"type": "array", "items": {"type": "string"}},
        "required_fields": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Extension: the input field names behind required_information.",
        },
        "status": {
            "type": "string",
            "description": "On execution_result and error: the outcome, or the code of the refusal or job error.",
        },
        "job_status": {
            "type": "string",
            "description": "Extension, on the error that ends an async capability's job: the job's state (failed, "
            "cancelled, expired).",
        },
        "external_id": {"type": "string"},
        "result": {"type": "object", "description": "Extension: the capability's output (its output_schema)."},
        "options": {"type": "array", "items": {"type": "object"}, "description": "Extension: what to choose from."},
    }
)
RESPONSE["properties"].pop("callback_url")
# An error answers requests whose interaction_id or query_hash was missing or malformed: it echoes them as given
# (cut to length), or "" when there was none.
RESPONSE["properties"]["interaction_id"] = {"type": "string", "maxLength": 128}
RESPONSE["properties"]["attribution"]["properties"]["query_hash"] = {"type": "string", "maxLength": 64}
RESPONSE["properties"]["fields"] = {**STRING_LIST, "description": "Extension, on errors: the fields at fault."}
COMPONENTS: dict[str, dict[str, Any]] = {"IntentEnvelope": SCHEMA, "IntentResponse": RESPONSE}


def _response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ref("IntentResponse"), description=description)


#: Both endpoints' answer while the site's key does not load: no envelope (it could not be signed) but the plain JSON
#: error of a server-side problem, in AHP §10's shape (intentweb.views.unsigned_error).
KEY_UNAVAILABLE = OpenApiResponse(
    ref("AHPError"),
    description="site_key_unavailable: the site's signing key does not load (system check E013 says why), so nothing "
    "can be signed; unsigned, and nothing was stored.",
)


INTENT = {
    "operation_id": "intentweb_intent",
    "summary": "Send an IntentWeb 1.0 message: an intent, or an answer in an interaction",
    "request": {"application/json": ref("IntentEnvelope")},
    "responses": {
        200: _response("The site's next message: information_request, clarification_request, execution_result..."),
        **{
            status: _response(f"An error envelope: {description}.")
            for status, description in (
                (400, "a malformed envelope, a wrong query_hash, a flow out of order"),
                (401, "credentials needed or refused, a stale timestamp, a replayed nonce, a bad signature"),
                (403, "the credentials may not do this"),
                (409, "the interaction has ended, or belongs to another client"),
                (413, "the body is over the size cap"),
                (429, "rate limit exceeded"),
            )
        },
        (503, "application/json"): KEY_UNAVAILABLE,
    },
    "tags": ["IntentWeb"],
}
STRINGS = {"type": "array", "items": {"type": "string"}}
#: The manifest (§2.2) as YAML decodes it, with our extensions (a capability's name, the attribution block).
MANIFEST: dict[str, Any] = {
    "type": "object",
    "required": ["manifest_version", "company", "last_updated", "capabilities", "contact"],
    "properties": {
        "manifest_version": {"type": "string"},
        "company": {"type": "string"},
        "last_updated": {"type": "string"},
        "about": {"type": "string"},
        "schema_type": {"type": "string"},
        "location": {"type": "object"},
        "operating_hours": {"type": "object", "additionalProperties": {"type": "string"}},
        "capabilities": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["intent", "description"],
                "properties": {
                    "intent": {"type": "string"},
                    "description": {"type": "string"},
                    "examples": STRINGS,
                    "requires": STRINGS,
                    "constraints": STRINGS,
                    "notes": STRINGS,
                    "operating_hours": {"type": "object", "additionalProperties": {"type": "string"}},
                    "capability": {"type": "string", "description": "Extension: its name on every front door."},
                },
            },
        },
        "contact": {
            "type": "object",
            "required": ["intent_endpoint"],
            "properties": {"intent_endpoint": {"type": "string"}, "website": {"type": "string"}},
        },
        "attribution": {
            "type": "object",
            "description": "Extension: the signing profile, and the site's actor_id, public key and DID.",
            "properties": {"public_key": {"type": "string"}, "actor_id": {"type": "string"}},
        },
    },
}
INTENT_MANIFEST = {
    "operation_id": "intentweb_manifest",
    "summary": "The IntentWeb manifest (§2): what intents this site fulfils, and its signing key",
    "responses": {
        (200, "application/yaml"): OpenApiResponse(MANIFEST, description="The manifest, in YAML."),
        # It is cached and conditional like agent.json (views.IntentManifestView).
        304: OpenApiResponse(description="Not modified (If-None-Match / If-Modified-Since matched)."),
        (503, "application/json"): KEY_UNAVAILABLE,
    },
    "tags": ["IntentWeb"],
}
