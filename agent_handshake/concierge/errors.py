"""The concierge's domain errors: what went wrong, in no protocol's words.

Every front door catches :class:`ConciergeError` in one exception handler and renders it in its own shape (AHP
§10 JSON, an NLWeb Failure, a JSON-RPC error...). An error carries:

- ``code``: a stable, lower-case name (``invalid_request``, ``rate_limited``...) that front doors map to their
  own codes;
- ``status``: the HTTP status an HTTP front door answers with;
- ``message``: a sentence for the agent (never a stack trace);
- ``details``: machine-readable facts (``fields``, ``reason``, ``available_capabilities``, ``scope``,
  ``retry_after``...), passed through as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ConciergeError(Exception):
    status = 400
    code = "invalid_request"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details


def split_job_error(stored: Mapping[str, Any] | None) -> tuple[Any, Any, dict[str, Any]]:
    """A failed or cancelled job's error, as the jobs module stores it (``{"code", "message", **details}``), split
    back into its code, message (None where it has none) and details. Each front door renders the three in its own
    shape, with its own fallbacks, so a refusal on a worker keeps the details a synchronous refusal shows."""
    details = dict(stored or {})
    return details.pop("code", None), details.pop("message", None), details


class InvalidInput(ConciergeError):
    """The request is malformed or names something that does not exist; ``fields`` names the culprits."""


class MissingInput(InvalidInput):
    code = "missing_field"


class UnsupportedType(InvalidInput):
    """No content type both sides support."""

    code = "unsupported_type"


class UnknownCapability(InvalidInput):
    code = "unknown_capability"


class AuthRequired(ConciergeError):
    """No credentials, or refused ones."""

    status = 401
    code = "auth_required"


class Forbidden(ConciergeError):
    status = 403
    code = "forbidden"


class NotFound(ConciergeError):
    """Unknown, or someone else's (a stranger learns nothing of what exists)."""

    status = 404


class Gone(ConciergeError):
    """It existed and has expired (a session after its idle timeout)."""

    status = 410


class Conflict(ConciergeError):
    """The request contradicts what was already done (an Idempotency-Key reused for another request)."""

    status = 422


class TooLarge(ConciergeError):
    status = 413
    code = "request_too_large"


class RateLimited(ConciergeError):
    """A limit was reached; ``scope`` and ``retry_after`` say which and for how long."""

    status = 429
    code = "rate_limited"


class Unavailable(ConciergeError):
    """A dependency (the embedding model, the index) cannot serve right now; the request may be retried."""

    status = 503
    code = "unavailable"


class Failed(ConciergeError):
    """The site's own code failed (logged); the agent learns nothing of its internals."""

    status = 500
    code = "concierge_error"
