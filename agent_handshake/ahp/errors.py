"""AHP error bodies (§10): every error of an AHP endpoint is JSON with a status, a code and a message."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse


def error_response(status: int, code: str, message: str, **extra: Any) -> JsonResponse:
    body = {"status": "error", "code": code, "message": message, **extra}
    return JsonResponse(body, status=status)


def method_not_allowed(method: str, allowed: list[str]) -> JsonResponse:
    response = error_response(
        405,
        "method_not_allowed",
        f"Method {method} is not allowed here; use {', '.join(allowed)}.",
        allowed_methods=allowed,
    )
    response["Allow"] = ", ".join(allowed)
    return response
