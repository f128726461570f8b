"""What every AHP endpoint shares: the §10 error rendering of the front door's exceptions, and AHP's body-borne
credentials."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from django.urls import reverse
from rest_framework.request import Request

from ..concierge import errors
from ..concierge.turns import answering_capabilities
from ..concierge.validation import named
from ..frontdoor import FrontDoorView
from ..identity.authentication import BodyCredentialsAuthentication
from .errors import error_response, render_error


class BodyTokenAuthentication(BodyCredentialsAuthentication):
    """AHP's body-borne credentials: ``"auth": "Bearer <secret>"`` in the JSON body (an appendix of the spec
    shows it); the headers come first."""

    def credentials_in(self, data: Any) -> object:
        body_auth = data.get("auth") if isinstance(data, dict) else None
        # AHP's field is a bearer token; anything else in it is not a credential (the request validator says so).
        return body_auth if isinstance(body_auth, str) and body_auth[:7].lower() == "bearer " else None


class AHPView(FrontDoorView):
    """An AHP endpoint: every error is §10 JSON, with the four ``X-RateLimit-*`` headers."""

    #: The methods that do the endpoint's work, which a 405's message tells the agent to use.
    allowed: list[str] = ["POST"]

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return render_error(error)

    def http_method_not_allowed(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # Allow names every method the resource supports (RFC 9110 §15.5.6), as the OPTIONS answer does: OPTIONS
        # too. The message names the methods that do the work.
        supported = self.allowed_methods
        message = f"Method {named(request.method or '')} is not allowed here; use {', '.join(self.allowed)}."
        response = error_response(405, "method_not_allowed", message, allowed_methods=supported)
        response["Allow"] = ", ".join(supported)
        return response


class MissingNameView(AHPView):
    """A path an AHP resource's name or id is missing from (``/capabilities``, ``/agent/converse/status/``): no
    resource, so AHP's JSON 404 for every method, saying where the resources are. An agent trims a URL to these; the
    site's own routes would answer with an HTML page (or, with ``APPEND_SLASH``, a redirect that loses a ``POST``).
    Not an endpoint: /openapi.json leaves it out."""

    #: Whose name is missing: ``"capability"`` or ``"session"`` (a job's status), set in the URL pattern.
    missing = "capability"
    authentication_classes: list = []
    openapi_inspector = None  # type: ignore[assignment]
    earns_trust = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # counted, for the X-RateLimit-* headers, then refused
        raise self.not_found()

    def not_found(self) -> errors.ConciergeError:
        if self.missing == "session":
            status = reverse("agent_handshake:converse_status", args=["-"])[:-1]
            return errors.NotFound(
                f"No session_id is in the URL: a job's status is at GET {status}<session_id>.", reason="unknown_session"
            )
        available = [capability.name for capability in answering_capabilities()]
        capability = reverse("agent_handshake:capability", args=["-"])[:-1]
        return errors.UnknownCapability(
            f"No capability is named in the URL: call one with POST {capability}<name> (the manifest lists them).",
            status=404,
            available_capabilities=available,
        )
