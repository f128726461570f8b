"""``POST /mcp``: MCP's Streamable HTTP transport, stateless, with JSON answers (AHP Appendix D).

A :class:`~agent_handshake.frontdoor.FrontDoorView`, so the body cap, the credentials (the same DRF
authentication classes as AHP, plus ``params._meta.auth``, Appendix D.5), the rate limits and the
``X-RateLimit-*`` headers are AHP's. On top of them:

- an ``Origin`` header must be ``BASE_URL``'s origin, one of ``MCP_ALLOWED_ORIGINS`` or name a host of
  ``ALLOWED_HOSTS`` other than ``"*"`` (DNS rebinding), else 403; an allowed one gets CORS, so a page there can
  call (:func:`cors`);
- a request gets a JSON-RPC response (a batch, a JSON array of them, each request in it counted against the rate
  limits as one request); notifications and responses get 202. Batches are for the revisions that have them
  (2024-11-05, 2025-03-26, and a request without ``MCP-Protocol-Version``); on 2025-06-18 and later one is an
  invalid request, refused whole, and one naming a revision we do not speak gets one error. A batch has the HTTP
  request's credentials and ``Idempotency-Key``: one carrying ``params._meta.auth``, or a key with more than one
  ``tools/call``, is refused, as is one holding ``initialize`` (which MUST NOT be batched);
  ``GET`` is 405: we offer no server-to-client stream. No ``Accept`` header is needed (AHP's 2024-11-05 client
  sends none), and no session: no ``Mcp-Session-Id`` is issued or checked;
- a JSON-RPC error's HTTP status is 400 for a body that is not JSON-RPC (and, on 2026-07-28, the statuses that
  revision assigns); a request the concierge refuses as a whole (credentials, limits, size) gets the HTTP status
  AHP would (401, 429, 413) with a JSON-RPC error body; the traffic insights record a JSON-RPC error, or a tool
  error, answered with 200 as the error it is (README, "What is recorded"), not as the success the status says, and
  a verified agent's trust goes down for one the concierge refused (a 4xx on AHP), as it would on AHP, and goes up
  only for a request the site did work for (a tool call, a resource read: :func:`server.earns_trust`), not for
  housekeeping (``initialize``, ``ping``, the listings, notifications, the ``job_status`` tool);
- a 401, and a tool that needed credentials, carry ``WWW-Authenticate`` with ``resource_metadata`` pointing at
  the RFC 9728 metadata (:class:`ProtectedResourceMetadataView`). Keys come from the site owner: we run no OAuth
  authorization server.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.http.request import split_domain_port, validate_host
from django.urls import reverse
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.decorators import method_decorator
from django.utils.http import quote_etag
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response

from .. import content_signals, state
from ..concierge import errors, traffic
from ..concierge.answering import combined_signals
from ..concierge.validation import named
from ..conf import app_settings
from ..cors import AGENT_HEADERS, answer_preflight, is_preflight, share_publicly
from ..frontdoor import AgentJSONParser, FrontDoorView, described
from ..hosts import base_url
from ..identity.authentication import AgentKeyAuthentication, BodyCredentialsAuthentication
from . import jsonrpc, server
from .jsonrpc import HTTP_STATUS, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION, RpcError
from .openapi import MCP
from .tools import Exchange
from .versions import BATCHING_VERSIONS, VERSIONS, Revision, batch_version, revision_of, unsupported


def slash(request: HttpRequest) -> str:
    """``"/"`` for a request that reached ``/mcp/`` (or its metadata's slashed path), else ``""``."""
    return "/" if request.path_info.endswith("/") else ""


def challenge(request: HttpRequest) -> str:
    # RFC 9728 §3.3: the metadata a challenge points at names, as its resource, the very URL the client used; §3.1
    # puts the metadata of https://site/mcp/ at /.well-known/oauth-protected-resource/mcp/.
    metadata = base_url(request) + reverse("agent_handshake:mcp_resource_metadata") + slash(request)
    return f'Bearer realm="agent_handshake", resource_metadata="{metadata}"'


def origin_of(url: str) -> str:
    """``scheme://host[:port]``, lower-cased, with the scheme's default port left out."""
    try:
        parts = urlsplit(url.strip().lower())  # an unclosed IPv6 bracket raises here
        port = parts.port
    except ValueError:
        return ""
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "") if host else ""


def origin_allowed(origin: str) -> bool:
    """Whether a browser page at ``origin`` may call ``/mcp``: ``MCP_ALLOWED_ORIGINS``, ``BASE_URL``'s origin, or
    a host ``ALLOWED_HOSTS`` names. A ``"*"`` in ``ALLOWED_HOSTS`` allows no origin: a DNS-rebinding page's
    Origin and Host both name the attacker's domain, so "any host" would let it through."""
    normalised = origin_of(origin)
    if not normalised:
        return False  # "null" and other opaque origins
    explicit = [*app_settings.MCP_ALLOWED_ORIGINS, *([app_settings.BASE_URL] if app_settings.BASE_URL else [])]
    if normalised in {origin_of(url) for url in explicit}:
        return True
    domain, _ = split_domain_port(urlsplit(normalised).netloc)
    allowed = [host for host in settings.ALLOWED_HOSTS if host != "*"]
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # what Django itself allows then
    return bool(domain) and validate_host(domain, allowed)


class MCPParser(AgentJSONParser):
    """A JSON-RPC message or batch; a body that is not JSON is JSON-RPC's parse error."""

    load = staticmethod(jsonrpc.load)


class MetaAuthentication(BodyCredentialsAuthentication):
    """Appendix D.5: a bearer token in ``params._meta.auth`` (``"Bearer <key>"`` or the key itself)."""

    def credentials_in(self, data: Any) -> object:
        params = data.get("params") if isinstance(data, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        return meta.get("auth") if isinstance(meta, dict) else None


def batch_refusal(batch: list[Any], headers: Any) -> str | None:
    """Why a batch is refused as a whole, or None. A batch is one HTTP request, so it has one set of credentials
    and one ``Idempotency-Key``: credentials per message (``_meta.auth``) and one key over several calls would be
    ambiguous, so the client is told to send those messages on their own. ``initialize`` MUST NOT be part of a
    batch (2025-03-26, the revision with batches, basic/lifecycle)."""
    if any(isinstance(item, dict) and item.get("method") == "initialize" for item in batch):
        return "Invalid Request: initialize must not be part of a batch; send it on its own."
    if any(MetaAuthentication().credentials_in(item) is not None for item in batch):
        return "Invalid Request: params._meta.auth is not read in a batch; send the key in the Authorization header."
    calls = sum(isinstance(item, dict) and item.get("method") == "tools/call" and "id" in item for item in batch)
    if headers.get("Idempotency-Key") and calls > 1:
        return "Invalid Request: an Idempotency-Key names one tools/call; send each call in a request of its own."
    return None


class MCPView(FrontDoorView):
    http_method_names = ["post", "options"]
    parser_classes = [MCPParser]
    authentication_classes = [AgentKeyAuthentication, MetaAuthentication]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        origin = request.headers.get("Origin")
        if origin is not None and not origin_allowed(origin):
            message = f"The Origin {named(origin)!r} is not one of this site's hosts."
            raise errors.Forbidden(message, code="origin_refused")
        super().initial(request, *args, **kwargs)

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        request_id = None
        try:
            # The id is in the body; a body refused for its declared size is not read for it (a client that
            # declares a large body and sends none would hold the worker).
            data = self.request.data if error.status != 413 else None
            if isinstance(data, dict) and jsonrpc.valid_id(data.get("id")):
                request_id = data["id"]
        except Exception:
            pass
        return Response(jsonrpc.from_domain(error).body(request_id), status=error.status)

    @described(**MCP)
    def post(self, request: Request) -> HttpResponseBase:
        data = request.data
        self.exchanges: list[Exchange] = []
        #: Whether a request in the body asked the site to do work (:func:`server.earns_trust`).
        self.worked = False
        if isinstance(data, list):
            version = batch_version(request.headers)
            if version not in VERSIONS:  # one answer for the HTTP request, a 400 as the transport says
                return Response(unsupported(version).body(None), status=400)
            if version not in BATCHING_VERSIONS:
                message = (
                    f"Invalid Request: batching is not supported on protocol revision {version} (2025-06-18 removed "
                    "JSON-RPC batches); send each message in a POST of its own."
                )
                return Response(jsonrpc.error(None, INVALID_REQUEST, message), status=400)
            if not data or len(data) > jsonrpc.MAX_BATCH:
                message = f"Invalid Request: a batch holds 1 to {jsonrpc.MAX_BATCH} messages."
                return Response(jsonrpc.error(None, INVALID_REQUEST, message), status=400)
            if refusal := batch_refusal(data, request.headers):
                return Response(jsonrpc.error(None, INVALID_REQUEST, refusal), status=400)
            # Each request in a batch counts as one request (the first was counted with the HTTP request).
            for _ in range(sum(isinstance(item, dict) and "id" in item and "method" in item for item in data) - 1):
                self.count(request, again=True)
            answers = [body for body, _ in (self.answer(item) for item in data) if body is not None]
            return Response(answers) if answers else Response(status=202)
        body, status = self.answer(data)
        return Response(status=202) if body is None else Response(body, status=status)

    def answer(self, data: Any) -> tuple[dict[str, Any] | None, int]:
        """One message's response and HTTP status (None for a notification or a response)."""
        request = self.request
        try:
            message = jsonrpc.parse(data)
        except RpcError as exc:
            traffic.note_error()  # in a batch, its HTTP status is the batch's 200
            self.declined = True
            request_id = data.get("id") if isinstance(data, dict) and jsonrpc.valid_id(data.get("id")) else None
            return exc.body(request_id), 400
        if message.kind != "request":
            header = request.headers.get("MCP-Protocol-Version")
            if header is not None and header not in VERSIONS:  # the transport's MUST holds for these too
                return unsupported(header).body(None), 400
            return None, 202
        revision: Revision | None = None
        try:
            revision = revision_of(message, request.headers)
            # A batch's reads share one MCP_MAX_RESOURCE_CHARS: each message starts from what those before it read.
            read = self.exchanges[-1].resource_chars if self.exchanges else 0
            exchange = Exchange(
                request, revision, base_url(request._request), usages=self.counter.usages, resource_chars=read
            )
            self.exchanges.append(exchange)
            self.worked = self.worked or server.earns_trust(message)
            return jsonrpc.result(message.id, server.dispatch(message, exchange)), 200
        except RpcError as exc:
            # An error in a 200 body, on the revisions that answer errors so: the status would say it is a success.
            traffic.note_error()
            self.declined = True  # nor does a verified agent's trust go up for it
            if revision is None or revision.modern:
                status = HTTP_STATUS.get(exc.code, 200)
            else:
                status = 400 if exc.code in (PARSE_ERROR, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION) else 200
            return exc.body(message.id), status

    def finalize_response(self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any) -> Any:
        exchanges = getattr(self, "exchanges", [])
        if response.status_code == 401 or any(exchange.challenged for exchange in exchanges):
            response.headers["WWW-Authenticate"] = challenge(request._request)
        # A tool error the concierge refused (isError, answered with 200) is declined, as its 4xx on AHP is: a
        # verified agent's trust goes down for it. A batch is one request: one refusal in it declines it.
        self.declined = self.declined or any(exchange.refused for exchange in exchanges)
        # One the site failed to serve (its 5xx on AHP) moves nothing, unless the batch also holds a refusal.
        self.site_failed = any(exchange.failed for exchange in exchanges)
        # Housekeeping (initialize, ping, the listings, a notification, a job's status) earns no trust.
        self.earns_trust = getattr(self, "worked", False)
        if any(exchange.replayed for exchange in exchanges):
            response.headers["Idempotent-Replayed"] = "true"
        if labels := [label for exchange in exchanges for label in exchange.signal_labels]:
            # The documents read say their own signals (the strictest, for a batch), as their markdown versions do;
            # the middleware would give the site's.
            response.headers[content_signals.HEADER] = content_signals.header_value(combined_signals(labels))
        origin = request.headers.get("Origin")
        if origin is not None and origin_allowed(origin):
            cors(request, response, origin)
        return super().finalize_response(request, response, *args, **kwargs)


#: What a page may read of our responses besides the safelisted headers (CORS).
EXPOSED_HEADERS = ", ".join(
    (
        "WWW-Authenticate",
        "Idempotent-Replayed",
        "Retry-After",
        *AGENT_HEADERS,
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "X-RateLimit-Window",
    )
)


def cors(request: Request, response: HttpResponseBase, origin: str) -> None:
    """CORS for a page at an origin :func:`origin_allowed` lets call ``/mcp``: without it the browser refuses the
    page its preflight (a JSON body, ``Authorization`` and the MCP headers all need one) and every response, so
    ``MCP_ALLOWED_ORIGINS`` would allow nothing. The preflight gets the headers the page asked for: the origin is
    trusted, and MCP clients add headers of their own (``Mcp-Param-*``)."""
    response.headers["Access-Control-Allow-Origin"] = origin
    patch_vary_headers(response, ["Origin"])
    if is_preflight(request):
        answer_preflight(request, response, origin=origin, methods="POST")
    else:
        response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS


@method_decorator(csrf_exempt, name="dispatch")
class ProtectedResourceMetadataView(View):
    """``GET /.well-known/oauth-protected-resource/mcp`` (RFC 9728): how to present credentials at ``/mcp``.

    It names no authorization server: API keys are issued by the site owner (see the README). Read-only, so exempt
    from CSRF: a wrong method gets a JSON 405, as on agent.json, not CSRF's HTML 403."""

    http_method_names = ["get", "head", "options"]

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        # Allow names every method the resource supports, as the OPTIONS answer does (RFC 9110 §15.5.6); the message
        # the ones that read the document. The body is the site's other documents' (agent.json, llms.txt).
        allowed = self._allowed_methods()
        message = f"Method {named(request.method or '')} is not allowed here; use GET, HEAD."
        body = {"status": "error", "code": "method_not_allowed", "message": message, "allowed_methods": allowed}
        response = JsonResponse(body, status=405)
        response.headers["Allow"] = ", ".join(allowed)
        share_publicly(response)  # as the document is, so a page on another origin reads the error
        return response

    def options(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Browser MCP clients fetch this with their MCP-Protocol-Version header: a preflight, answered for any origin
        # as the GET is (the document is public). No content, so no Content-Type.
        response = HttpResponse()
        del response.headers["Content-Type"]
        response.headers["Allow"] = ", ".join(self._allowed_methods())
        response.headers["Content-Length"] = "0"
        if is_preflight(request):
            answer_preflight(request, response, origin="*", methods="GET, HEAD")
        return response

    def get(self, request: HttpRequest) -> HttpResponseBase:
        base = base_url(request)
        metadata = {
            "resource": base + reverse("agent_handshake:mcp") + slash(request),
            "bearer_methods_supported": ["header"],
            "resource_documentation": base + reverse("agent_handshake:manifest"),
        }
        if name := state.snapshot().name:
            metadata["resource_name"] = name
        response: HttpResponseBase = JsonResponse(metadata)
        # Its validator is its bytes: a few built for each request, which name the URL and host asked and the site's
        # name, so each URL and host has its own and a change of name is a new one. (The documents' state-token ETag
        # is in agent_handshake/views.py, which a front door may not import.)
        etag = quote_etag(hashlib.sha256(response.content).hexdigest()[:32])
        response = get_conditional_response(request, etag=etag) or response
        response.headers["ETag"] = etag
        response.headers["Cache-Control"] = f"public, max-age={app_settings.HTTP_MAX_AGE}"
        share_publicly(response)
        return response
