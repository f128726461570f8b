"""What every AHP endpoint shares: the §10 error rendering of the front door's exceptions, and AHP's body-borne
credentials."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from ..concierge import errors
from ..frontdoor import FrontDoorView
from ..identity import auth
from ..identity.authentication import REALM, AgentUser, CredentialsRefused
from .errors import method_not_allowed, render_error


class BodyTokenAuthentication(BaseAuthentication):
    """AHP's body-borne credentials: ``"auth": "Bearer <secret>"`` in the JSON body (an appendix of the spec
    shows it); the headers (:class:`~agent_handshake.identity.authentication.AgentKeyAuthentication`) come first."""

    def authenticate(self, request: Request) -> tuple[AgentUser, auth.Credentials] | None:
        data = request.data
        body_auth = data.get("auth") if isinstance(data, dict) else None
        if not (isinstance(body_auth, str) and body_auth[:7].lower() == "bearer "):
            return None
        try:
            credentials = auth.authenticate(request._request, b"", body_auth)
        except auth.AuthError as exc:
            raise CredentialsRefused(exc) from exc
        return (AgentUser(credentials), credentials) if credentials else None

    def authenticate_header(self, request: Request) -> str:
        return REALM


class AHPView(FrontDoorView):
    """An AHP endpoint: every error is §10 JSON, with the four ``X-RateLimit-*`` headers."""

    allowed: list[str] = ["POST"]

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return render_error(error)

    def http_method_not_allowed(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return method_not_allowed(request.method or "", self.allowed)
