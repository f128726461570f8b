"""JSON-RPC 2.0 as MCP uses it: parsing one message, building results and errors.

A request has a string or integer ``id`` (MCP forbids ``null``) and a ``method``; a notification has no ``id``;
a message with ``result`` or ``error`` is a response to a request of ours (we send none, so it is acknowledged and
dropped); an error response may have a null or no ``id``, when the id of what it answers could not be read.
Errors use JSON-RPC's codes, MCP's reserved ones (:data:`HEADER_MISMATCH`, :data:`UNSUPPORTED_PROTOCOL_VERSION`,
:data:`RESOURCE_NOT_FOUND`) and :data:`SERVER_ERROR` for the concierge's domain errors, whose stable name is in
``error.data.code``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..concierge import errors
from ..concierge.validation import check_values, decode

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
#: A domain error of the concierge (auth, limits, size...): ``data.code`` names it.
SERVER_ERROR = -32000
RESOURCE_NOT_FOUND = -32002
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

#: The HTTP status of a failed request, where the transport gives one (2026-07-28 requires these; earlier
#: revisions answer errors with 200, except a body that is not JSON-RPC at all).
HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
#: Messages in one batch (2025-03-26 allows batches; each is a request the concierge may answer).
MAX_BATCH = 20


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def body(self, request_id: Any) -> dict[str, Any]:
        return error(request_id, self.code, self.message, self.data)


@dataclass
class Message:
    kind: str  # "request", "notification" or "response"
    method: str = ""
    id: Any = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}


def load(body: bytes) -> Any:
    """The body as JSON (an object or a batch) whose strings can be stored; not JSON is a parse error."""
    try:
        data = decode(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.InvalidInput(f"Parse error: the body is not JSON ({exc}).", code="parse_error") from exc
    except RecursionError:
        raise errors.InvalidInput("Parse error: the body is nested too deeply.", code="parse_error") from None
    check_values(data)
    return data


def valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(data: Any) -> Message:
    """One JSON-RPC message, or :class:`RpcError` ``INVALID_REQUEST`` (with the id, when it has a usable one)."""
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: a JSON-RPC 2.0 message is an object with "jsonrpc": "2.0".')
    if "method" not in data:
        if ("result" in data or "error" in data) and valid_id(data.get("id")):
            return Message("response", id=data["id"])
        if "error" in data and "result" not in data and data.get("id") is None:
            # An error about a message whose id could not be read: JSON-RPC gives it "id": null, MCP (2025-11-25 on)
            # may leave the id out.
            return Message("response")
        raise RpcError(INVALID_REQUEST, "Invalid Request: no method.")
    method = data["method"]
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "Invalid Request: method must be a non-empty string.")
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: MCP params are an object.")
    if "id" not in data:
        return Message("notification", method=method, params=params)
    if not valid_id(data["id"]):
        raise RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer (not null).")
    return Message("request", method=method, id=data["id"], params=params)


def result(request_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def from_domain(exc: errors.ConciergeError) -> RpcError:
    """A concierge error as a JSON-RPC error: a parse error, an invalid request, or a server error naming it."""
    if exc.code == "parse_error":
        return RpcError(PARSE_ERROR, exc.message)
    data = {"code": exc.code, **{k: v for k, v in exc.details.items() if v is not None}}
    if exc.status == 400 and exc.code == "invalid_request":
        return RpcError(INVALID_REQUEST, exc.message, data)
    return RpcError(SERVER_ERROR, exc.message, data)
