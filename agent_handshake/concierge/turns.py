"""One request of an agent's conversation, protocol-neutral: a :class:`TurnRequest` in, one result out.

A front door parses its protocol's body, authenticates the caller and counts the request; then it makes one call,
:func:`take_turn`, and renders what comes back. (The AHP door, ``/agent/converse`` and ``/capabilities/<name>``,
works this way; NLWeb, MCP, ASP and IntentWeb still call :func:`~.conversation.converse` or a
:class:`~.calls.Call` themselves, after routing with :func:`route_text` where they route.)

Behind that call, in this order:

1. a request that names no capability is routed. A session it continues keeps its capability (or, after a
   routing clarification, takes the one its ``clarification`` chooses); otherwise the query (or the agent's
   intent vector) is ranked among :func:`answering_capabilities`, with :data:`DEFAULT_CAPABILITY` for questions,
   and a clear winner is used as if it had been named. A tie or a low score is an :class:`Offered` clarification
   listing the candidates, kept in a new session;
2. the capability is found (:class:`~.errors.UnknownCapability`, listing the others, when it is not offered),
   its authentication and scope are checked (:func:`~.invocation.authorize`), and the content type negotiated
   (:func:`~.negotiation.negotiate`);
3. a MODE2 capability is asked the question (:func:`~.conversation.converse`): :class:`Answered`. A MODE3 one is
   called (:class:`~.calls.Call`): :class:`Called`, with the status and body the front door's ``render_call``
   made of the call's result, since an idempotent retry is answered with the first response as it was sent.

Domain errors are raised as :mod:`.errors`, for the front door's exception handler. Nothing here knows an HTTP
request or a protocol's field names, except the names the front door passes in to say where a value came from.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from ..identity.auth import printable_ascii
from ..registry import Capability, capability_registry
from . import calls, errors, routing, search_scope
from . import limits as ratelimit
from .conversation import Owner, Question, Turn, converse
from .invocation import authorize
from .negotiation import Negotiated, negotiate

#: The capability a question goes to when it names none and no action capability claims it.
DEFAULT_CAPABILITY = "content_search"


def answering_capabilities() -> list[Capability]:
    """The capabilities a conversation can use: those with a handler, currently available."""
    return [capability for capability in capability_registry.available() if capability.handler is not None]


@dataclass(frozen=True)
class Caller:
    """Who sends the request, as the front door authenticated and counted it."""

    #: The checked credentials (:class:`~agent_handshake.identity.auth.Credentials`), None for an anonymous agent.
    credentials: Any
    #: The client's IP address as the front door found it (None: not a valid address).
    address: str | None
    #: The request's rate-limit counts so far; a capability's own count is added (the front door's headers report
    #: the most constrained).
    usages: list[ratelimit.Usage] = field(default_factory=list)

    @property
    def owner(self) -> Owner:
        return Owner.of(self.credentials, self.address)


@dataclass(frozen=True)
class TurnRequest:
    """A conversational request, in no protocol's words. The ``*_field`` names say where the front door's body
    carries a value, for the errors that name it."""

    query: str
    #: None: the agent leaves the choice to the site (routing).
    capability: str | None = None
    session_id: str | None = None
    clarification: str | None = None
    requesting_agent: str = ""
    max_tokens: int | None = None
    #: The content types the agent accepts, most preferred first (None: ``text/answer``).
    accept_types: list[str] | None = None
    #: Retrieval filters: the site's sections (or model labels), content types and a publication window.
    sections: list[str] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)
    published_after: datetime.datetime | None = None
    published_before: datetime.datetime | None = None
    sections_field: str = "filters.sections"
    #: The agent's goal as an embedding (Agent Semantic Protocol), used for routing instead of the query's.
    intent_vector: list[float] | None = None
    intent_vector_field: str = "intent_vector"
    #: MODE3 structured input; None to extract it from ``query``.
    input: dict[str, Any] | None = None
    input_prefix: str = "input."
    callback_url: str = ""
    callback_field: str = "callback_url"
    idempotency_key: str | None = None
    #: What identifies the request for idempotency (the body without its credentials).
    fingerprint: Any = None
    _: KW_ONLY
    #: The front door's name and the resource asked for: an idempotency record is one door's, for one resource.
    protocol: str
    path: str


@dataclass(frozen=True)
class Offered:
    """Routing could not choose: the question listing the candidates, in the new session ``session_id``."""

    session_id: str
    question: str
    options: list[str]


@dataclass(frozen=True)
class Answered:
    """A MODE2 capability's turn (a reply or its clarification)."""

    turn: Turn
    capability: Capability
    negotiated: Negotiated


@dataclass(frozen=True)
class Called:
    """A MODE3 capability's call, as the front door rendered its result."""

    status: int
    body: dict[str, Any]
    #: An idempotent retry: the stored first response.
    replayed: bool = False


#: The front door's rendering of a MODE3 call's result: its HTTP status and body.
RenderCall = Callable[[calls.Result, Capability, Negotiated], tuple[int, dict[str, Any]]]


def take_turn(request: TurnRequest, caller: Caller, render_call: RenderCall) -> Offered | Answered | Called:
    """The request's result: see the module docstring for the way it takes."""
    capabilities = answering_capabilities()
    if request.capability is None and capabilities:
        routed = _routed(request, caller.owner, capabilities)
        if isinstance(routed, Offered):
            return routed
        request = routed
    capability = next((c for c in capabilities if c.name == request.capability), None)
    if capability is None:
        # With none to route among (a MODE1 site), a clarification would offer nothing, and ask again for ever.
        named = request.capability
        raise errors.UnknownCapability(
            f"The capability {named!r} is not supported." if named else "This site has no capability to answer.",
            available_capabilities=[c.name for c in capabilities],
        )
    authorize(capability, caller.credentials)
    negotiated = negotiate(capability, request.accept_types)
    if capability.action_type is not None:
        return _call(request, caller, capability, negotiated, render_call)
    question = Question(
        capability=capability,
        text=request.query,
        session_id=request.session_id,
        clarification=request.clarification,
        content_type=negotiated.content_type,
        fallback_from=negotiated.fallback_from,
        max_tokens=request.max_tokens,
        filters=search_scope.of_sections(
            request.sections,
            content_types=request.content_types,
            published_after=request.published_after,
            published_before=request.published_before,
            field=request.sections_field,
        ),
        requesting_agent=request.requesting_agent,
    )
    return Answered(converse(question, caller.owner), capability, negotiated)


def route(request: TurnRequest, capabilities: list[Capability]) -> routing.Route:
    """The routing of a request that names no capability, by its intent vector when it has one (one that is not
    usable is :class:`~.errors.InvalidInput` naming its field)."""
    vector = None
    if request.intent_vector is not None:
        vector = routing.intent_vector(request.intent_vector, name=request.intent_vector_field)
    return route_text(request.query, capabilities, vector)


def route_text(text: str, capabilities: list[Capability], vector: np.ndarray | None = None) -> routing.Route:
    """The capability for ``text`` (or for ``vector``, a checked intent vector, when given) among ``capabilities``
    (see :mod:`.routing`), with :data:`DEFAULT_CAPABILITY` taking the questions no action claims: the one rule of
    every front door that routes."""
    default = next((c for c in capabilities if c.name == DEFAULT_CAPABILITY), None)
    return routing.route(text, capabilities, vector=vector, default=default)


def _routed(request: TurnRequest, owner: Owner, capabilities: list[Capability]) -> TurnRequest | Offered:
    """The request with the capability routing chose, or the clarification asking which one."""
    if request.session_id:
        chosen, by_choice = routing.resume(request.session_id, owner, request.clarification, capabilities)
        if chosen is not None:
            # A clarification that chose the capability is not also an answer to that capability's questions.
            clarification = None if by_choice else request.clarification
            return dataclasses.replace(request, capability=chosen.name, clarification=clarification)
    found = route(request, capabilities)
    if found.chosen is not None:
        return dataclasses.replace(request, capability=found.chosen.name)
    offer = routing.offer(found, request.query, request.requesting_agent, owner)
    return Offered(offer.session_id, offer.question, offer.options)


def _call(
    request: TurnRequest, caller: Caller, capability: Capability, negotiated: Negotiated, render_call: RenderCall
) -> Called:
    if request.idempotency_key and not printable_ascii(request.idempotency_key):
        raise errors.InvalidInput("Idempotency-Key must be printable ASCII characters.")
    call = calls.Call(
        capability=capability,
        owner=caller.owner,
        address=caller.address,
        path=request.path,
        protocol=request.protocol,
        query=request.query,
        input=request.input,
        input_prefix=request.input_prefix,
        session_id=request.session_id,
        clarification=request.clarification,
        requesting_agent=request.requesting_agent,
        callback_url=request.callback_url,
        callback_field=request.callback_field,
        content_type=negotiated.content_type,
        fallback_from=negotiated.fallback_from,
        fingerprint_of=request.fingerprint,
        usages=caller.usages,
    )
    status, body = call.respond(lambda result: render_call(result, capability, negotiated), request.idempotency_key)
    return Called(status, body, call.replayed)
