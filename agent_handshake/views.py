"""The MODE1 documents: ``/.well-known/agent.json``, ``/llms.txt``, ``/llms-full.txt``, ``/robots.txt`` and
the markdown version of each registered object.

They are cached under the content state's token (see :mod:`agent_handshake.state`), answer conditional
requests with 304, and answer a wrong method with AHP JSON, never an HTML error page. They are DRF views with
nothing of DRF's request handling left on (no authentication, parsing or negotiation: public documents), so that
``/openapi.json`` describes them with the protocol endpoints.
"""

from __future__ import annotations

import abc
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import reverse
from django.utils.cache import get_conditional_response
from django.utils.encoding import iri_to_uri
from django.utils.http import http_date, quote_etag
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from . import content_signals, state
from .ahp.errors import method_not_allowed
from .ahp.manifest import build_manifest
from .conf import app_settings
from .cors import answer_preflight, is_preflight, share_publicly
from .frontdoor import PinnedNegotiation, described
from .hosts import base_url, request_origin
from .identity.site_key import site_public_key
from .intentweb import manifest as intent_manifest
from .intentweb.openapi import INTENT_MANIFEST
from .intentweb.views import key_unavailable, unsigned_error
from .llms_txt import absolute_url, iter_llms_full_txt, render_document, render_llms_txt
from .models import Document
from .state import Snapshot

logger = logging.getLogger(__name__)

MARKDOWN_CONTENT_TYPE = "text/markdown; charset=utf-8"


def _named_in_allowed_hosts(domain: str) -> bool:
    """Whether ALLOWED_HOSTS names ``domain`` itself, not only a wildcard (``*``, ``.example.com``) matching it."""
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # what get_host() accepts then
    return any(pattern.lower() in (domain, "." + domain) for pattern in allowed)


def site_base(request: HttpRequest) -> tuple[str, bool]:
    """Scheme and host for absolute links (:func:`agent_handshake.hosts.base_url`: ``BASE_URL``, else where the
    request reached the site), and whether the documents built on them may go to the shared cache.

    What the shared cache holds must not grow with what clients send, so only a host that ``ALLOWED_HOSTS`` names
    itself, on the scheme's default port, is shared. A host only a wildcard lets in (``*``, ``.example.com``) could
    be any name; and a port cannot be trusted even when it is ``SERVER_PORT``: gunicorn on a unix socket copies that
    from ``Host``. Their documents are kept in the process (see :func:`cached_locally`)."""
    if app_settings.BASE_URL:
        return base_url(request), True
    origin = request_origin(request)
    return origin.url, origin.port is None and _named_in_allowed_hosts(origin.domain)


# Documents whose base URL is not shared (see site_base), in this process only: a few sites' worth, emptied when it
# grows, so a client naming many hosts or ports costs renders and never memory.
_local_bodies: dict[str, str | bytes] = {}
LOCAL_BODIES_LIMIT = 32


def cached_locally(key: str, render: Callable[[], str | bytes]) -> str | bytes:
    """The body kept in this process under ``key``, else ``render()``-ed and kept (never in the shared cache)."""
    body = _local_bodies.get(key)
    if body is None:
        body = render()
        if len(_local_bodies) >= LOCAL_BODIES_LIMIT:
            _local_bodies.clear()
        _local_bodies[key] = body
    return body


def base_digest(base: str) -> str:
    """A short digest of a base URL, for the validators and cache keys of what names it: each host and scheme the
    site is served under has its own."""
    return hashlib.md5(base.encode()).hexdigest()[:12]


def _finish(response: HttpResponseBase, etag: str, last_modified: int) -> HttpResponseBase:
    """Validators and caching headers of a generated document (a fresh response, so plain assignments).

    ``last_modified`` may be a second or two ahead of the clock right after several changes in one second (each
    state is a second later than the one before): RFC 9110 §8.8.2.1 has an origin send its ``Date`` then. The
    conditional check still compares with the state's own time, so a client holding the earlier state is answered
    in full."""
    headers = response.headers
    headers["ETag"] = etag
    headers["Last-Modified"] = http_date(min(last_modified, int(time.time())))
    headers["Cache-Control"] = f"public, max-age={app_settings.HTTP_MAX_AGE}"
    headers["Vary"] = "Accept"
    share_publicly(response)
    return response


def document(name: str, media_type: str, description: str, schema: dict[str, Any] | None = None) -> Any:
    """The OpenAPI description of a document's GET: its body in ``media_type``, or 304."""
    return described(
        operation_id=f"get_{name}",
        summary=description,
        responses={
            (200, media_type): OpenApiResponse(schema or {"type": "string"}, description=description),
            304: OpenApiResponse(description="Not modified (If-None-Match / If-Modified-Since matched)."),
        },
        tags=["Discovery"],
    )


#: What /openapi.json says of the manifest (its full schema is the AHP spec's, with the NOTES.md additions).
MANIFEST_SCHEMA = {
    "type": "object",
    "required": ["ahp", "modes", "capabilities", "content_signals"],
    "properties": {
        "ahp": {"type": "string"},
        "modes": {"type": "array", "items": {"type": "string"}},
        "capabilities": {"type": "array", "items": {"type": "object"}},
        "content_signals": {"type": "object"},
        "integrations": {"type": "object"},
    },
}


class AgentDocumentView(APIView, abc.ABC):
    """A generated, cacheable document answered with ETag/Last-Modified and 304 on a match."""

    http_method_names = ["get", "head", "options"]
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []
    parser_classes: list = []
    renderer_classes = [JSONRenderer]
    content_negotiation_class = PinnedNegotiation
    versioning_class = None
    schema = None  # out of the site's own schema; /openapi.json documents us (see FrontDoorView)
    openapi_inspector: type[AutoSchema] = AutoSchema
    kind = ""
    content_type = "text/plain; charset=utf-8"
    #: Build the body once per state and keep it in the cache (False for streamed documents).
    cache_body = True

    def enabled(self) -> bool:
        return True

    @property
    def default_response_headers(self) -> dict[str, str]:
        return {}

    def perform_authentication(self, request: Request) -> None:
        """Nobody to identify: the documents are public."""

    def handle_exception(self, exc: Exception) -> HttpResponseBase:
        if isinstance(exc, Http404):
            raise exc  # the site's own 404 page, as for any URL it does not serve
        return super().handle_exception(exc)

    def options(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = HttpResponse()
        del response.headers["Content-Type"]  # no content, so no type (Django's default would say text/html)
        response.headers["Allow"] = ", ".join(self.allowed_methods)
        response.headers["Content-Length"] = "0"
        if is_preflight(request):
            # Its GET is sent to any origin (:func:`_finish`), so a page that adds a header (``If-None-Match``, an
            # MCP client's ``MCP-Protocol-Version``) is let send it; without this the browser refuses it the document.
            answer_preflight(request, response, origin="*", methods="GET, HEAD")
        return response

    @abc.abstractmethod
    def render(self, snapshot: Snapshot, base: str) -> str | bytes | Iterable[str]:
        """The document's body (an iterable of strings when ``cache_body`` is False)."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not self.enabled():
            raise Http404
        return self.respond(request)

    def respond(self, request: HttpRequest) -> HttpResponseBase:
        snapshot = state.snapshot()
        base, shared = site_base(request)
        # The base URL is in the body (absolute links), so it is part of the validator and the cache key.
        variant = f"{self.kind}-{snapshot.token}-{base_digest(base)}"
        etag = quote_etag(variant)
        response = get_conditional_response(request, etag=etag, last_modified=snapshot.last_modified_timestamp)
        if response is None:
            if self.cache_body:
                cached = state.cached_body if shared else cached_locally
                body = cached(f"agent_handshake:{variant}", lambda: self.render(snapshot, base))
                response = HttpResponse(body, content_type=self.content_type)
            else:
                # A WSGI server iterates a streamed body on HEAD too (gunicorn does), which would read every document
                # for nothing: HEAD gets GET's headers and an empty stream (no Content-Length, as GET has none).
                body = () if request.method == "HEAD" else self.render(snapshot, base)
                response = StreamingHttpResponse(body, content_type=self.content_type)
        # The site's signals, which these documents state or hold (see llms_txt.offered), also when the manifest
        # answers an Accept header on an object's page, whose model may have signals of its own.
        response.headers[content_signals.HEADER] = snapshot.signal_header()
        return _finish(response, etag, snapshot.last_modified_timestamp)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Allow names what the OPTIONS answer names (OPTIONS too); the message, the methods that read the document.
        response = method_not_allowed(request.method or "", ["GET", "HEAD"], self.allowed_methods)
        # Sent to any origin as the document is: a page on another origin reads the error, not a network error.
        share_publicly(response)
        return response


class ManifestView(AgentDocumentView):
    """``GET /.well-known/agent.json``: the AHP manifest (§3.1, §4)."""

    content_type = "application/json"

    @property
    def kind(self) -> str:  # type: ignore[override]
        # integrations.intentweb publishes the site's public key: a new key is a new document.
        try:
            return "manifest-" + site_public_key()[:16]
        except ImproperlyConfigured:
            return "manifest"

    @document(
        "agent_manifest",
        "application/json",
        "The AHP manifest (§4): capabilities, endpoints, content signals",
        MANIFEST_SCHEMA,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)

    def render(self, snapshot: Snapshot, base: str) -> bytes:
        return json.dumps(build_manifest(snapshot, base), indent=2, ensure_ascii=False).encode()


class IntentManifestView(AgentDocumentView):
    """``GET /intentmanifest.yaml``: the IntentWeb manifest (§2), cached and conditional like ``agent.json``."""

    content_type = "application/yaml; charset=utf-8"

    @property
    def kind(self) -> str:  # type: ignore[override]
        # The site's public key is in the body: a new key is a new document.
        return "intentmanifest-" + site_public_key()[:16]

    @described(**INTENT_MANIFEST)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)

    def respond(self, request: HttpRequest) -> HttpResponseBase:
        # The manifest publishes the key the site signs its attribution entries with, and POST /intent cannot sign
        # without it: no manifest until the key loads (system check E013 says what is wrong with it).
        try:
            site_public_key()
        except ImproperlyConfigured:
            logger.exception("The site key cannot be loaded: /intentmanifest.yaml answers 503")
            response = unsigned_error(key_unavailable("its IntentWeb manifest cannot be published"))
            share_publicly(response)  # a page reads the error as it would the manifest
            return response
        return super().respond(request)

    def render(self, snapshot: Snapshot, base: str) -> str:
        return intent_manifest.render(snapshot, base)


class LlmsTxtView(AgentDocumentView):
    """``GET /llms.txt``: the site's index for language models (the llms.txt convention)."""

    kind = "llms"
    content_type = MARKDOWN_CONTENT_TYPE

    @document("llms_txt", "text/markdown", "llms.txt: the site's index for language models")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)

    def render(self, snapshot: Snapshot, base: str) -> str:
        return render_llms_txt(snapshot, base)


class LlmsFullTxtView(AgentDocumentView):
    """``GET /llms-full.txt``: every registered object's markdown, streamed."""

    kind = "llms-full"
    content_type = MARKDOWN_CONTENT_TYPE
    cache_body = False

    @document("llms_full_txt", "text/markdown", "llms-full.txt: every page's full text in one markdown document")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)

    def render(self, snapshot: Snapshot, base: str) -> Iterable[str]:
        return iter_llms_full_txt(snapshot, base)


class RobotsTxtView(AgentDocumentView):
    """``GET /robots.txt`` with the content-signal lines, when ``SERVE_ROBOTS_TXT`` is on."""

    kind = "robots"

    @document("robots_txt", "text/plain", "robots.txt with the content-signal lines")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)

    def enabled(self) -> bool:
        return app_settings.SERVE_ROBOTS_TXT

    def render(self, snapshot: Snapshot, base: str) -> str:
        return content_signals.robots_txt(
            snapshot.site_signals,
            manifest_url=base + reverse("agent_handshake:manifest"),
            training_crawlers=app_settings.AI_TRAINING_CRAWLERS,
            extra=app_settings.ROBOTS_TXT_EXTRA,
        )


def manifest_response(request: HttpRequest) -> HttpResponseBase:
    """The manifest for a request made to another URL with ``Accept: application/agent+json`` (§3.2)."""
    return ManifestView(request=request).respond(request)


def markdown_response(request: HttpRequest, document: Document) -> HttpResponseBase:
    """The markdown version of one registered object's page."""
    label = f"{document.content_type.app_label}.{document.content_type.model}"
    snapshot = state.snapshot()
    base = base_url(request)
    # Its URL line and its canonical Link name the base URL: each host has its own validator, as for the documents.
    etag = quote_etag(f"md-{document.content_hash[:16]}-{snapshot.token}-{base_digest(base)}")
    last_modified = int(max(document.updated_at, snapshot.last_modified).timestamp())
    response = get_conditional_response(request, etag=etag, last_modified=last_modified)
    if response is None:
        response = HttpResponse(render_document(document, base), MARKDOWN_CONTENT_TYPE)
    response.headers[content_signals.HEADER] = snapshot.signal_header(label)
    # A header holds ASCII only: an IRI ("/articles/日本茶/") or a stray CR/LF in the URL is percent-encoded.
    canonical = iri_to_uri(absolute_url(base, document.url))
    response.headers["Link"] = f'<{canonical}>; rel="canonical"; type="text/html"'
    return _finish(response, etag, last_modified)
