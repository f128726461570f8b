"""What every protocol's front door shares: a DRF view with our policies pinned, and one exception path.

:class:`FrontDoorView` is a DRF ``APIView`` whose parsers, authentication, renderers, content negotiation,
permissions and throttles are set on the class, so a site's own ``REST_FRAMEWORK`` defaults (session
authentication, a global throttle, the browsable API) never reach an agent endpoint. For every request it:

1. refuses a ``Content-Length`` that is not a number or is over ``MAX_REQUEST_BYTES`` (the parser checks the
   body it reads too);
2. authenticates with :mod:`agent_handshake.identity.authentication` (API key or signed request);
3. counts the request with django-ratelimit (:mod:`agent_handshake.concierge.limits`): per API key, else per
   client network; refused credentials count per network, so guessing keys is limited too; an ``OPTIONS`` (a
   browser's CORS preflight) is not counted;
4. adds the ``X-RateLimit-*`` headers to every response, errors included;
5. records the request for the site's agent traffic insights (:mod:`agent_handshake.insights.recording`): opened
   before anything else, so a request refused at the door is recorded too, and finished with its status, its
   latency and who asked once the response is made (a streamed one when its stream ends).

Every exception becomes a :class:`~agent_handshake.concierge.errors.ConciergeError` (:func:`domain_error`:
DRF's own, Django's, and anything unexpected, which is logged and becomes ``Failed``), and the view's
``render_error`` shows it in its protocol's shape, never as an HTML page.
"""

from __future__ import annotations

import abc
import functools
import ipaddress
import logging
import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponseBase
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .concierge import errors
from .concierge import limits as ratelimit
from .concierge.validation import load_object, named
from .conf import app_settings
from .identity import trust
from .identity.authentication import REALM, AgentKeyAuthentication, CredentialsRefused
from .insights import recording
from .registry import capability_registry

logger = logging.getLogger(__name__)

#: The header every front door sends with an idempotent retry's stored answer.
REPLAYED = "Idempotent-Replayed"


PORT = re.compile(r"^\[(?P<v6>[^\]]+)\](?::\d+)?$|^(?P<v4>[\d.]+):\d+$")


def forwarded_address(request: HttpRequest) -> str | None:
    """The client's address as the ``TRUSTED_PROXY_COUNT`` reverse proxies in front of the site saw it.

    Each proxy appends the address it received the request from to ``X-Forwarded-For``, so the last N entries
    are written by the site's own proxies and the N-th from the right is the client; anything further left
    came from the client and is ignored. With no proxies, or a header shorter than the proxy chain (a request
    that did not come through all of it), ``REMOTE_ADDR``.
    """
    proxies = app_settings.TRUSTED_PROXY_COUNT
    if proxies > 0:
        header = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in header.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR")


def _parse_address(value: object) -> str | None:
    """``value`` as a normalised IP address (an IPv4-mapped IPv6 address as IPv4, a port or an IPv6 zone
    dropped), else None."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    port = PORT.match(value)
    if port:
        value = port.group("v6") or port.group("v4")
    value = value.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return str(address)


def client_address(request: HttpRequest) -> str | None:
    """The visiting agent's IP address: ``CLIENT_IP_FUNCTION``'s answer when set, else :func:`forwarded_address`;
    None when it is not a valid address. Every per-client count and anonymous session ownership use this."""
    find = app_settings.CLIENT_IP_FUNCTION
    return _parse_address(find(request) if find else forwarded_address(request))


def _too_large() -> errors.TooLarge:
    return errors.TooLarge(f"The request body is over the {app_settings.MAX_REQUEST_BYTES}-byte cap.")


def check_declared_length(request: Any) -> None:
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not (declared.isascii() and declared.isdigit()):  # Django's request.body would fail on it (a 500)
        raise errors.InvalidInput("Content-Length must be a number of bytes.")
    if int(declared) > app_settings.MAX_REQUEST_BYTES:
        raise _too_large()


class AgentJSONParser(BaseParser):
    """A JSON object of at most ``MAX_REQUEST_BYTES``, checked by :func:`~.concierge.validation.load_object`
    (depth, unstorable strings). It is used whatever the ``Content-Type`` says: agents send JSON."""

    media_type = "application/json"
    #: What the bytes must be (a front door may accept more than one JSON object: MCP's batches).
    load = staticmethod(load_object)

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        request = (parser_context or {})["request"]._request
        try:
            body = request.body  # read once; a signed request's authentication already cached it
        except RequestDataTooBig:
            raise _too_large() from None
        if len(body) > app_settings.MAX_REQUEST_BYTES:
            raise _too_large()
        return self.load(body)


class PinnedNegotiation(BaseContentNegotiation):
    """Our parser for every body and JSON for every response: the protocol decides what it sends (an event
    stream is its own response), so an ``Accept`` header never makes DRF answer 406 or a body 415."""

    def select_parser(self, request: Request, parsers: list[BaseParser]) -> BaseParser:
        return parsers[0]

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None) -> tuple:
        return renderers[0], renderers[0].media_type


def described(**kwargs: Any) -> Any:
    """drf-spectacular's ``extend_schema`` for a view method, based on drf-spectacular's own ``AutoSchema`` whatever
    the site's ``DEFAULT_SCHEMA_CLASS`` says (``extend_schema`` would otherwise build on DRF's own inspector)."""

    def decorate(method: Any) -> Any:
        method.kwargs = {**getattr(method, "kwargs", {}), "schema": AutoSchema}
        return extend_schema(**kwargs)(method)

    return decorate


def domain_error(exc: Exception) -> errors.ConciergeError:
    """Any exception as a domain error; an unexpected one is logged and becomes :class:`~.errors.Failed`."""
    if isinstance(exc, errors.ConciergeError):
        return exc
    if isinstance(exc, CredentialsRefused):
        if exc.error.status == 403:  # a blocked DID: who it is is known, and refused
            return errors.Forbidden(exc.error.message, code=exc.error.code)
        return errors.AuthRequired(exc.error.message, code=exc.error.code)
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return errors.AuthRequired(str(exc.detail))
    if isinstance(exc, exceptions.MethodNotAllowed):
        return errors.ConciergeError(str(exc.detail), code="method_not_allowed", status=405)
    if isinstance(exc, exceptions.PermissionDenied):
        return errors.Forbidden(str(exc.detail))
    if isinstance(exc, exceptions.Throttled):
        return errors.RateLimited(str(exc.detail), retry_after=exc.wait and int(exc.wait))
    if isinstance(exc, (exceptions.NotFound, Http404)):
        return errors.NotFound("Not found.")
    if isinstance(exc, RequestDataTooBig):
        return _too_large()
    if isinstance(exc, exceptions.APIException) and 400 <= exc.status_code < 500:
        return errors.InvalidInput(str(exc.detail), status=exc.status_code)
    logger.error("A front door failed", exc_info=exc)
    return errors.Failed("The concierge failed; the error was logged.")


@functools.cache
def protocol_of(view: type) -> str:
    """The protocol a view's requests are recorded under: its package in this app (``ahp``, ``nlweb``, ``mcp``,
    ``intentweb``, ``schema_templates``, ``asp``), else its module's top package."""
    parts = view.__module__.split(".")
    return parts[1] if parts[0] == __package__ and len(parts) > 2 else parts[0]


class FrontDoorView(APIView, abc.ABC):
    """The base of every protocol endpoint (see the module docstring); subclasses set :meth:`render_error`."""

    authentication_classes = [AgentKeyAuthentication]
    #: Anyone may call; each capability decides what it needs (AllowAny also tells /openapi.json that credentials
    #: are optional here).
    permission_classes = [AllowAny]
    throttle_classes: list = []
    parser_classes = [AgentJSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = PinnedNegotiation
    versioning_class = None
    #: None: a site's own schema generation (DRF's or drf-spectacular's) leaves our views out, since their components
    #: live in our /openapi.json, which documents them with :attr:`openapi_inspector`.
    schema = None
    #: drf-spectacular's inspector for /openapi.json, whatever the site's DEFAULT_SCHEMA_CLASS.
    openapi_inspector: type[AutoSchema] = AutoSchema
    #: True to authenticate and count in the handler, after the body is read (AHP: credentials may be in it).
    lazy_authentication = False
    #: The protocol this view's requests are recorded under in the traffic insights ("": :func:`protocol_of`).
    insights_protocol = ""
    #: The URL keyword arguments that name the capability a request is for, recorded before the concierge says
    #: (a request refused at the door still names it).
    insights_capability_kwargs = ("name", "scenario")
    #: Set by a handler whose 2xx answer does not accept the request (an ASP intent the site cannot serve): a verified
    #: agent's trust goes down for it, as for a 4xx, not up.
    declined = False
    #: Set by a handler whose 2xx answer reports the site's own failure (an MCP tool call with search down): as for
    #: a 5xx, a verified agent's trust does not move for it (unless :attr:`declined` is set too).
    site_failed = False
    #: False for a request that does no work for the agent (housekeeping: a job's status, NLWeb's /await, the schema
    #: templates' listing, MCP's ping): accepted, it moves a verified agent's trust no more than a 5xx does (ten of
    #: them would otherwise take a new DID to the top tier); refused, it lowers trust as any refusal does. An
    #: idempotent replay (a response with ``Idempotent-Replayed: true``) moves trust neither way.
    earns_trust = True

    @abc.abstractmethod
    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        """``error`` as the protocol's error response (its status is ``error.status``)."""

    @property
    def default_response_headers(self) -> dict[str, str]:
        """None: DRF would put ``Allow`` on every response; ours carry it on a 405 and an OPTIONS only."""
        return {}

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if request.method == "OPTIONS":  # a browser's preflight, not an agent's request
            return super().dispatch(request, *args, **kwargs)
        named = next((kwargs[name] for name in self.insights_capability_kwargs if name in kwargs), "")
        # Only a capability the site has: a made-up name in the path would be a new group per request.
        named = named if isinstance(named, str) and capability_registry.get(named) is not None else ""
        record = recording.begin(self.insights_protocol or protocol_of(type(self)), named)
        if record is None:
            return super().dispatch(request, *args, **kwargs)
        try:
            response = super().dispatch(request, *args, **kwargs)
        except BaseException:
            self.settle(record, request, 500)
            recording.finish(record)
            raise
        self.settle(record, request, response.status_code)
        if getattr(response, "streaming", False):
            response.streaming_content = recording.streamed(record, response.streaming_content)
            recording.release(record)  # the stream takes it up again; this thread's context is left clean
        else:
            recording.finish(record)
        return response

    def settle(self, record: recording.Record, request: Any, status: int) -> None:
        """Who asked (never authenticating here: only what the request did) and the status, on ``record``; a
        failure here is logged, never the request's."""
        try:
            credentials = getattr(getattr(self, "request", None), "_auth", None)
            kind, agent = recording.who_asked(credentials)
            address = client_address(request) if kind == recording.AgentKind.ANONYMOUS else None
            record.settle(status, agent_kind=kind, agent=agent, address=address)
        except Exception:
            logger.exception("An agent request's sender could not be recorded")
            record.settle(status, agent_kind=recording.AgentKind.ANONYMOUS, agent="", address=None)

    def initialize_request(self, request: Any, *args: Any, **kwargs: Any) -> Request:
        # DRF reads no body without a Content-Type; agents that leave it out still send JSON (as AgentJSONParser
        # reads whatever the header says).
        if not request.META.get("CONTENT_TYPE"):
            request.META["CONTENT_TYPE"] = AgentJSONParser.media_type
        return super().initialize_request(request, *args, **kwargs)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self.counter = ratelimit.Counter(client_address(request._request))
        # Every method: a signed GET's authentication reads the body, which Django sizes by Content-Length.
        check_declared_length(request._request)
        super().initial(request, *args, **kwargs)  # authenticates, unless lazily
        if request.method == "OPTIONS":  # answered with Allow (and CORS) only: never counted nor refused
            self.counter.peek_ip()
        elif not self.lazy_authentication:
            self.count(request)

    def perform_authentication(self, request: Request) -> None:
        if not self.lazy_authentication:
            request.user  # noqa: B018 - DRF authenticates on first access

    def http_method_not_allowed(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # The message names the methods that do the work (every protocol's error shape shows it), as AHP's does: an
        # agent built for upstream NLWeb's GET /ask learns to POST. Allow (handle_exception) lists OPTIONS too.
        used = ", ".join(method for method in self.allowed_methods if method != "OPTIONS")
        message = f"Method {named(request.method or '')} is not allowed here; use {used}."
        raise exceptions.MethodNotAllowed(request.method, detail=message)

    def options(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """An empty 200 with ``Allow``, as Django answers (DRF's metadata would describe the view)."""
        response = Response(status=200)
        response.headers["Allow"] = ", ".join(self.allowed_methods)
        response.headers["Content-Length"] = "0"
        return response

    def count(self, request: Request, *, again: bool = False) -> None:
        """Count the request (per API key, else per network); ``again`` counts one more on the same counter (a
        batch's second and later messages: each is a request)."""
        if request.auth is None:
            usage = self.counter.add(ratelimit.count_ip(self.counter.address)) if again else self.counter.count_ip()
            message = "Rate limit exceeded for this IP address."
        else:
            usage = self.counter.add(ratelimit.count_key(request.auth.rate_key, request.auth.rate_tier))
            message = "Rate limit exceeded for this API key."
            network = None
            if not usage.exceeded and request.auth.agent is not None:
                network = ratelimit.count_did_network(self.counter.address)
            if network is not None:
                usage = self.counter.add(network)
                message = "Rate limit exceeded for this network's verified agents."
        if usage.exceeded:
            raise errors.RateLimited(message, scope=usage.public_scope, retry_after=usage.retry_after)

    def handle_exception(self, exc: Exception) -> HttpResponseBase:
        if isinstance(exc, CredentialsRefused):
            ip = self.counter.count_ip()  # guessing keys counts against the sender's network
            if ip.exceeded:
                exc = errors.RateLimited(
                    "Rate limit exceeded for this IP address.", scope=ip.public_scope, retry_after=ip.retry_after
                )
        error = domain_error(exc)
        response = self.render_error(error)
        if error.status == 401:
            response.headers["WWW-Authenticate"] = REALM
        if error.status in (429, 503) and isinstance(error.details.get("retry_after"), int):
            response.headers["Retry-After"] = str(error.details["retry_after"])
        if isinstance(exc, exceptions.MethodNotAllowed):
            response.headers["Allow"] = ", ".join(self.allowed_methods)
        return response

    def finalize_response(self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        counter = getattr(self, "counter", None) or ratelimit.Counter(client_address(request._request))
        credentials = getattr(request, "_auth", None)  # never authenticates here: only what the request did
        # A 5xx is the site's failure (search down, a key that does not load), not the agent's: it moves no trust.
        failed = response.status_code >= 500 or (self.site_failed and not self.declined)
        # An OPTIONS asks the site nothing (an empty answer, uncounted): accepted, it would farm trust for free.
        asked = request.method != "OPTIONS"
        status = response.status_code
        accepted = status < 400 and not self.declined
        # An idempotent replay (every door says so with this header) is the stored answer of a request already judged:
        # it moves nothing. Accepted, one request sent again and again would raise the agent's tier; refused, an
        # honest network retry would be penalised twice.
        replayed = response.headers.get(REPLAYED) == "true"
        # Housekeeping, accepted, or a replay: no work done that trust could reward or refuse.
        idle = replayed or (accepted and not self.earns_trust)
        if getattr(credentials, "agent", None) is not None and asked and not failed and not idle:
            note = "" if accepted or status >= 400 else " (not accepted)"
            trust.record(credentials.agent.pk, accepted, f"{request.method} {request.path[:120]} -> {status}{note}")
        return rate_limit_headers(response, counter)


def rate_limit_headers(response: HttpResponseBase, counter: ratelimit.Counter) -> HttpResponseBase:
    """The four ``X-RateLimit-*`` headers of the counter :meth:`~.concierge.limits.Counter.reported` names, and on a
    429 ``Retry-After``: the longer of that counter's wait and the one the refusal gave (a budget may refuse with no
    counter of its own in the request). A request refused for something else (a body over the cap) gets no
    ``Retry-After``: it would not succeed for waiting."""
    usage, retry_after = counter.reported(refused=response.status_code == 429)
    response.headers["X-RateLimit-Limit"] = str(usage.limit)
    response.headers["X-RateLimit-Remaining"] = str(usage.remaining)
    response.headers["X-RateLimit-Reset"] = str(usage.reset)
    response.headers["X-RateLimit-Window"] = str(usage.window)
    if retry_after is not None:
        given = response.headers.get("Retry-After", "")
        response.headers["Retry-After"] = str(max(retry_after, int(given)) if given.isdigit() else retry_after)
    return response
