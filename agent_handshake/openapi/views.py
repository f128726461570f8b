"""``GET /openapi.json`` and the browsable API reference.

The document is an :class:`~agent_handshake.views.AgentDocumentView`: built once per content state and base URL,
with ETag, Last-Modified and 304s like the manifest. The reference (Swagger UI) is served with its assets from the
drf-spectacular-sidecar package, never a CDN; it is on when ``DEBUG`` is, or when ``API_DOCS`` says so, and a 404
otherwise.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

import drf_spectacular_sidecar
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import render
from django.urls import get_script_prefix, reverse
from django.views import View
from django.views.static import serve

from ..conf import app_settings
from ..state import Snapshot
from ..views import AgentDocumentView
from .document import build

SWAGGER_UI = Path(drf_spectacular_sidecar.__file__).parent / "static" / "drf_spectacular_sidecar" / "swagger-ui-dist"
ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "favicon-32x32.png")


def docs_enabled() -> bool:
    enabled = app_settings.API_DOCS
    return settings.DEBUG if enabled is None else bool(enabled)


class OpenAPIView(AgentDocumentView):
    """``GET /openapi.json``: the OpenAPI 3.1 document of every agent endpoint."""

    content_type = "application/json"

    @property
    def kind(self) -> str:  # type: ignore[override]
        # servers[0] carries the script prefix (see build): a site served under another path is another document.
        prefix = get_script_prefix()
        return "openapi" if prefix == "/" else "openapi-" + hashlib.md5(prefix.encode()).hexdigest()[:8]

    def render(self, snapshot: Snapshot, base: str) -> bytes:
        return json.dumps(build(base), ensure_ascii=False).encode()


class APIDocsView(View):
    """``GET /agent/api-docs/``: Swagger UI over ``/openapi.json`` (see the module docstring)."""

    http_method_names = ["get", "head"]

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if not docs_enabled():
            raise Http404
        # The one inline script (starting Swagger UI) runs by a nonce new with each response: the policy forbids
        # every other inline script, one injected into the page included.
        nonce = secrets.token_urlsafe(18)
        context = {
            "script_nonce": nonce,
            "schema_url": reverse("agent_handshake:openapi"),
            "assets": {
                name.split(".")[0].replace("-", "_"): reverse("agent_handshake:api_docs_asset", args=[name])
                for name in ASSETS
            },
        }
        response = render(request, "agent_handshake/api_docs.html", context)
        response.headers["Content-Security-Policy"] = (
            f"default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:"
        )
        return response


class APIDocsAssetView(View):
    http_method_names = ["get", "head"]

    def get(self, request: HttpRequest, name: str) -> Any:
        if not docs_enabled() or name not in ASSETS:
            raise Http404
        response = serve(request, name, document_root=str(SWAGGER_UI))
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response
