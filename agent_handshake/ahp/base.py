"""What every AHP endpoint shares: the §10 error rendering of the front door's exceptions, and AHP's body-borne
credentials."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from rest_framework.request import Request

from ..concierge import errors
from ..frontdoor import FrontDoorView
from ..identity.authentication import BodyCredentialsAuthentication
from .errors import method_not_allowed, render_error


class BodyTokenAuthentication(BodyCredentialsAuthentication):
    """AHP's body-borne credentials: ``"auth": "Bearer <secret>"`` in the JSON body (an appendix of the spec
    shows it); the headers come first."""

    def credentials_in(self, data: Any) -> object:
        body_auth = data.get("auth") if isinstance(data, dict) else None
        # AHP's field is a bearer token; anything else in it is not a credential (the request validator says so).
        return body_auth if isinstance(body_auth, str) and body_auth[:7].lower() == "bearer " else None


class AHPView(FrontDoorView):
    """An AHP endpoint: every error is §10 JSON, with the four ``X-RateLimit-*`` headers."""

    allowed: list[str] = ["POST"]

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return render_error(error)

    def http_method_not_allowed(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return method_not_allowed(request.method or "", self.allowed)
