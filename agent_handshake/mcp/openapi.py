"""How ``POST /mcp`` appears in ``/openapi.json``: JSON-RPC 2.0 in and out (the tools and resources themselves are
listed by MCP's ``tools/list`` and ``resources/list``; nothing here is served)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


ID = {"type": ["string", "integer"]}
COMPONENTS: dict[str, dict[str, Any]] = {
    "JSONRPCMessage": {
        "type": "object",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": ID,
            "method": {"type": "string"},
            "params": {"type": "object"},
        },
    },
    "JSONRPCResponse": {
        "type": "object",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "result": {"type": "object"},
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
            },
        },
    },
}
ONE_OR_BATCH = {"oneOf": [ref("JSONRPCResponse"), {"type": "array", "items": ref("JSONRPCResponse")}]}


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ref("JSONRPCResponse"), description=description)


MCP = {
    "operation_id": "mcp",
    "summary": "MCP: JSON-RPC 2.0 over Streamable HTTP, stateless (AHP Appendix D)",
    "description": (
        "Every MCP revision from 2024-11-05 to 2026-07-28. Tools are the site's capabilities (plus `ask` and "
        "`job_status`), resources its documents. Credentials as for AHP, or in `params._meta.auth`."
    ),
    "request": {
        "application/json": {"oneOf": [ref("JSONRPCMessage"), {"type": "array", "items": ref("JSONRPCMessage")}]}
    },
    "responses": {
        200: OpenApiResponse(ONE_OR_BATCH, description="The JSON-RPC response (a batch: an array of them)."),
        202: OpenApiResponse(description="A notification or a response: accepted, no body."),
        400: _error(
            "Not JSON-RPC, an unsupported MCP-Protocol-Version, a batch on a revision without batches (2025-06-18 "
            "on), or (2026-07-28) an envelope or headers that disagree."
        ),
        401: _error("The credentials were refused (see WWW-Authenticate)."),
        403: _error("The Origin is not one of the site's hosts."),
        404: _error("(2026-07-28) No such method."),
        413: _error("The body is over the size cap."),
        429: _error("Rate limit exceeded."),
    },
    "tags": ["MCP"],
}
