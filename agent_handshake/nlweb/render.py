"""NLWeb v0.54 response bodies: Answer, Elicitation, Promise and Failure, each with its ``_meta``.

``_meta.response_type`` is emitted in lower case (``answer``, ``elicitation``, ``promise``, ``failure``), as
the spec's examples write it; ``/ask`` and ``/await`` read it in any case. ``_meta.version`` is the version we
speak ("0.54"), and ``_meta.session_context.conversation_id`` the conversation to continue (the same session as
AHP's ``session_id``).

An Answer is ``results`` (``conv_search``) or ``content`` + ``structuredData`` (``chatgpt_app``); with
``mode: summarize`` the answer text is ``_meta.summary`` (as http_example.md §2 places it) and, for
``chatgpt_app``, the first ``content`` item.
"""

from __future__ import annotations

from typing import Any

from ..concierge import errors
from .request import VERSION

#: Domain error code -> NLWeb error code.
CODES = {
    "invalid_request": "INVALID_PARAMETER",
    "missing_field": "MISSING_PARAMETER",
    "unknown_capability": "INVALID_PARAMETER",
    "unsupported_type": "INVALID_PARAMETER",
    "auth_required": "AUTHENTICATION_REQUIRED",
    "forbidden": "FORBIDDEN",
    "rate_limited": "RATE_LIMITED",
    "request_too_large": "REQUEST_TOO_LARGE",
    "unavailable": "UNAVAILABLE",
    "concierge_error": "INTERNAL_ERROR",
    "method_not_allowed": "METHOD_NOT_ALLOWED",
}


def meta(response_type: str, conversation_id: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"response_type": response_type, "version": VERSION}
    if conversation_id:
        body["session_context"] = {"conversation_id": conversation_id}
    body.update(extra)
    return body


def answer(
    items: list[dict[str, Any]],
    *,
    response_format: str,
    conversation_id: str | None,
    summary: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    head = meta("answer", conversation_id, response_format=response_format, **extra)
    if summary:
        head["summary"] = summary
    if response_format == "chatgpt_app":
        content = [{"type": "text", "text": summary}] if summary else []
        content += [item_content(item) for item in items]
        return {"_meta": head, "content": content, "structuredData": items}
    return {"_meta": head, "results": items}


def item_content(item: dict[str, Any]) -> dict[str, str]:
    """A ``chatgpt_app`` answer's ``content`` entry for one of its ``structuredData`` items: the item in words."""
    return {"type": "text", "text": _describe(item)}


def _describe(item: dict[str, Any]) -> str:
    parts = [str(item.get("name") or item.get("@type"))]
    if item.get("description"):
        parts.append(str(item["description"]))
    offer = item.get("offers")
    if isinstance(offer, dict) and offer.get("price"):
        parts.append(f"Price: {offer['price']} {offer.get('priceCurrency', '')}".strip())
    if item.get("url"):
        parts.append(str(item["url"]))
    return " — ".join(parts)


def elicitation(text: str, questions: list[dict[str, Any]], conversation_id: str | None) -> dict[str, Any]:
    return {"_meta": meta("elicitation", conversation_id), "elicitation": {"text": text, "questions": questions}}


def promise(token: str, estimated_time: int | None, message: str, conversation_id: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"token": token, "message": message}
    if estimated_time is not None:
        body["estimated_time"] = estimated_time
    return {"_meta": meta("promise", conversation_id), "promise": body}


#: Domain error class -> NLWeb error code, where the class says more than the code.
CLASS_CODES = ((errors.NotFound, "NOT_FOUND"), (errors.Gone, "EXPIRED"), (errors.Conflict, "CONFLICT"))


def failure(error: errors.ConciergeError, conversation_id: str | None = None) -> dict[str, Any]:
    code = next((name for kind, name in CLASS_CODES if isinstance(error, kind)), None)
    code = code or CODES.get(error.code, error.code.upper())
    body: dict[str, Any] = {"code": code, "message": error.message}
    if error.details:
        body["details"] = error.details
    return {"_meta": meta("failure", conversation_id), "error": body}
