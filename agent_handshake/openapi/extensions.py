"""The credentials every front door accepts, as OpenAPI security schemes (imported before a document is built)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

SCHEMES = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key issued by the site owner, as `Authorization: Bearer <key>`.",
    },
    "ahpKey": {"type": "apiKey", "in": "header", "name": "X-AHP-Key", "description": "The same key, as X-AHP-Key."},
    "signedRequest": {
        "type": "apiKey",
        "in": "header",
        "name": "X-AHP-Signature",
        "description": (
            "An HMAC-SHA256-signed request: `X-AHP-Key-Id`, `X-AHP-Timestamp` and "
            "`X-AHP-Signature: v1=<hex>` over the method, path, timestamp and body digest (see the README)."
        ),
    },
}


class AgentKeyScheme(OpenApiAuthenticationExtension):
    """AHP's header credentials: any one of the three schemes (an OR, one requirement each)."""

    target_class = "agent_handshake.identity.authentication.AgentKeyAuthentication"
    name = list(SCHEMES)

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list[Any]]]:
        return [{name: []} for name in SCHEMES]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        return list(SCHEMES.values())
