"""AHP error bodies (§10): every error of an AHP endpoint is JSON with a status, a code and a message."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

from ..concierge import errors
from ..concierge.validation import named


def error_response(status: int, code: str, message: str, **extra: Any) -> JsonResponse:
    body = {"status": "error", "code": code, "message": message, **extra}
    return JsonResponse(body, status=status)


def method_not_allowed(method: str, allowed: list[str], supported: list[str] | None = None) -> JsonResponse:
    """A 405 whose message says to use ``allowed`` (the methods that do the work) and whose ``Allow`` names every
    method the resource supports (RFC 9110 §15.5.6), OPTIONS too: ``supported``, ``allowed`` when not given."""
    supported = supported or allowed
    response = error_response(
        405,
        "method_not_allowed",
        f"Method {named(method)} is not allowed here; use {', '.join(allowed)}.",
        allowed_methods=supported,
    )
    response["Allow"] = ", ".join(supported)
    return response


def render_error(exc: errors.ConciergeError) -> JsonResponse:
    """A domain error as AHP §10 JSON (with ``Retry-After`` when the wait is known)."""
    response = error_response(exc.status, exc.code, exc.message, **exc.details)
    retry_after = exc.details.get("retry_after")
    if exc.status in (429, 503) and isinstance(retry_after, int):
        response.headers["Retry-After"] = str(retry_after)
    return response
