"""Verified agent identity over AHP (our extension; AHP §8.3 leaves it to future work): the Agent Semantic Protocol
handshake (:mod:`agent_handshake.identity.handshake`) as two JSON requests.

``POST /agent/handshake``::

    {"did": "did:agent-semantic-protocol:<hex>", "public_key": "<base64url, 32 bytes>",
     "challenge": "<base64url, 32 random bytes>", "agent_id": "...", "capabilities": ["..."],
     "version": "1.0.0", "timestamp": <Unix seconds>}

answers the site's ``handshake_id``, ``did``, ``public_key``, ``challenge`` and ``challenge_response`` (its
signature of the agent's challenge), ``expires_in`` and ``timestamp``. ``POST /agent/handshake/verify``::

    {"handshake_id": "...", "did": "...", "challenge_response": "<base64url signature of the site's challenge>"}

answers ``{"token_type": "Bearer", "access_token": "asp_...", "expires_in", "did", "trust", "tier", "scopes"}``.
Both take no credentials; refusals are §10 errors (401 with a ``code`` from the handshake; 403 ``blocked``, or
``key_revoked``, ``key_expired``, ``client_inactive`` for a DID whose own API key or agent client an operator took
out of use; 400 for a malformed body) and are counted per client network like any anonymous request.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from ..concierge import errors
from ..frontdoor import described
from ..hosts import base_url
from ..identity import handshake
from ..identity.did import SIGNATURE_BYTES, decode
from ..identity.site_key import b64url
from ..registry import capability_registry
from .base import AHPView

MAX_CAPABILITIES = 50
B64URL = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}
COMPONENTS: dict[str, dict[str, Any]] = {
    "HandshakeHello": {
        "type": "object",
        "required": ["did", "public_key", "challenge"],
        "properties": {
            "did": {"type": "string", "pattern": "^did:agent-semantic-protocol:[0-9a-f]{64}$"},
            "public_key": {**B64URL, "description": "The raw 32-byte Ed25519 public key."},
            "challenge": {**B64URL, "description": "32 random bytes the site signs."},
            "agent_id": {"type": "string", "maxLength": 200},
            "capabilities": {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 50},
            "version": {"type": "string"},
            "timestamp": {"type": "integer", "description": "Unix seconds."},
        },
    },
    "HandshakeAnswer": {
        "type": "object",
        "properties": {
            "handshake_id": {"type": "string"},
            "did": {"type": "string"},
            "public_key": B64URL,
            "challenge": {**B64URL, "description": "32 bytes the agent signs (role initiator)."},
            "challenge_response": {**B64URL, "description": "The site's signature of the agent's challenge."},
            "expires_in": {"type": "integer"},
            "verify": {"type": "string"},
        },
    },
    "HandshakeVerify": {
        "type": "object",
        "required": ["handshake_id", "did", "challenge_response"],
        "properties": {"handshake_id": {"type": "string"}, "did": {"type": "string"}, "challenge_response": B64URL},
    },
    "AgentSessionCredential": {
        "type": "object",
        "properties": {
            "token_type": {"type": "string", "enum": ["Bearer"]},
            "access_token": {"type": "string"},
            "expires_in": {"type": "integer"},
            "did": {"type": "string"},
            "trust": {"type": "number"},
            "tier": {"type": "string"},
            "scopes": {"type": "array", "items": {"type": "string"}},
        },
    },
}


def _operation(operation_id: str, summary: str, request: str, response: str) -> dict[str, Any]:
    error = OpenApiResponse({"$ref": "#/components/schemas/AHPError"}, description="A §10 error.")
    return {
        "operation_id": operation_id,
        "summary": summary,
        "request": {"application/json": {"$ref": f"#/components/schemas/{request}"}},
        "responses": {
            200: OpenApiResponse({"$ref": f"#/components/schemas/{response}"}, description="Accepted."),
            **{status: error for status in (400, 401, 403, 413, 429)},
        },
        "tags": ["Verified agents"],
        "auth": [],
    }


HANDSHAKE = _operation(
    "agent_handshake_begin", "Begin a DID handshake: your key and challenge; the site's", "HandshakeHello",
    "HandshakeAnswer",
)  # fmt: skip
HANDSHAKE_VERIFY = _operation(
    "agent_handshake_verify", "Finish a DID handshake: your signature of the site's challenge; a credential",
    "HandshakeVerify", "AgentSessionCredential",
)  # fmt: skip


def site_url(request: Request) -> str:
    """Scheme and host the site is reached at, as every door's links (and the protobuf answer's ``agent_id``) use:
    ``BASE_URL``, else the request's host with a port only where the server listens (:mod:`agent_handshake.hosts`)."""
    return base_url(request)


def refused(exc: handshake.HandshakeRefused) -> errors.ConciergeError:
    fields = [exc.field] if exc.field else []
    if exc.status == 403:
        return errors.Forbidden(exc.message, code=exc.code)
    return errors.AuthRequired(exc.message, code=exc.code, fields=fields)


def text(data: dict[str, Any], name: str, *, required: bool = True, limit: int = 200) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value or len(value) > limit:
        raise errors.InvalidInput(f"{name} must be a string of 1 to {limit} characters.", fields=[name])
    return value


def raw(data: dict[str, Any], name: str, size: int) -> bytes:
    value = decode(data.get(name), size)
    if value is None:
        raise errors.InvalidInput(f"{name} must be {size} bytes in base64url.", fields=[name])
    return value


class HandshakeView(AHPView):
    """``POST /agent/handshake``: the agent's DID, key and challenge; the site's signed answer and challenge."""

    authentication_classes: list = []
    http_method_names = ["post", "options"]

    @described(**HANDSHAKE)
    def post(self, request: Request) -> HttpResponseBase:
        data = request.data
        capabilities = data.get("capabilities", [])
        if (
            not isinstance(capabilities, list)
            or len(capabilities) > MAX_CAPABILITIES
            or not all(isinstance(item, str) and len(item) <= 100 for item in capabilities)
        ):
            raise errors.InvalidInput(
                f"capabilities must be a list of at most {MAX_CAPABILITIES} names.", fields=["capabilities"]
            )
        timestamp = data.get("timestamp")
        if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)):
            raise errors.InvalidInput("timestamp must be Unix seconds (an integer).", fields=["timestamp"])
        hello = handshake.Hello(
            did=text(data, "did", limit=100),
            public_key=raw(data, "public_key", 32),
            challenge=raw(data, "challenge", 32),
            agent_id=text(data, "agent_id", required=False),
            capabilities=capabilities,
            timestamp=timestamp,
        )
        try:
            answer = handshake.begin(hello)
        except handshake.HandshakeRefused as exc:
            raise refused(exc) from None
        return Response(
            {
                "handshake_id": answer.handshake_id,
                "did": answer.did,
                "public_key": b64url(answer.public_key),
                "agent_id": site_url(request) + "/",
                "capabilities": [c.name for c in capability_registry.available()],
                "version": handshake.VERSION,
                "timestamp": answer.timestamp,
                "challenge": b64url(answer.challenge),
                "challenge_response": b64url(answer.challenge_response),
                "expires_in": answer.expires_in,
                "verify": site_url(request) + reverse("agent_handshake:handshake_verify"),
            }
        )


class HandshakeVerifyView(AHPView):
    """``POST /agent/handshake/verify``: the agent's signature of the site's challenge; a session credential."""

    authentication_classes: list = []
    http_method_names = ["post", "options"]

    @described(**HANDSHAKE_VERIFY)
    def post(self, request: Request) -> HttpResponseBase:
        data = request.data
        handshake_id = text(data, "handshake_id", limit=64)
        did = text(data, "did", limit=100)
        signature = raw(data, "challenge_response", SIGNATURE_BYTES)
        try:
            session = handshake.complete(handshake_id, did, signature)
        except handshake.HandshakeRefused as exc:
            raise refused(exc) from None
        return Response(
            {
                "token_type": "Bearer",
                "access_token": session.token,
                "expires_in": session.expires_in,
                "did": session.agent.did,
                "trust": round(session.agent.trust, 4),
                "tier": session.tier.name,
                "scopes": sorted(set(session.tier.scopes) | set(session.agent.scopes or ())),
            },
            headers={"Cache-Control": "no-store"},
        )
