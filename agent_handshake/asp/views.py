"""``POST /agent/asp``: Agent Semantic Protocol messages as framed protobuf over HTTP (see :mod:`agent_handshake.asp`).

The body is one frame (:mod:`.framing`) of ``Content-Type: application/x-protobuf``; a success is one frame back,
of the same content type. A refusal cannot be a frame (a malformed frame has no type to answer in), so every error
is AHP §10 JSON, ``{"status": "error", "code", "message", ...}``, with its 4xx (or 5xx) status and the
``X-RateLimit-*`` headers, as at every front door.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, HttpResponseBase, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from google.protobuf.message import Message
from rest_framework.parsers import BaseParser
from rest_framework.request import Request

from ..concierge import errors
from ..concierge.conversation import Owner, Question, converse
from ..concierge.intent_vectors import usable_intent_vector
from ..concierge.invocation import authorize
from ..concierge.turns import answering_capabilities, route_text
from ..concierge.validation import UNSTORABLE_MESSAGE, unstorable
from ..conf import app_settings
from ..frontdoor import FrontDoorView, client_address, described
from ..hosts import base_url
from ..identity import handshake, signed_intents, trust
from ..identity.auth import Credentials
from ..identity.authentication import AgentUser
from ..identity.did import CHALLENGE_BYTES, SIGNATURE_BYTES
from ..identity.site_key import site_did, site_public_key_bytes
from ..registry import Capability, capability_registry
from . import asp_pb2, signing
from .framing import FrameError, MessageType, decode, encode

MEDIA_TYPE = "application/x-protobuf"
#: Content types read as a frame (``application/protobuf`` is the IANA registration's name).
MEDIA_TYPES = (MEDIA_TYPE, "application/protobuf", "application/octet-stream")
NS = 1_000_000_000
#: What POST /agent/handshake takes of a HandshakeMessage's self-declared fields (and an intent's ``capabilities``):
#: longer is refused, as there, never cut.
MAX_CAPABILITIES = 50
MAX_CAPABILITY_NAME = 100
MAX_AGENT_ID = 200
#: The longest ``payload`` an intent may ask, in characters: the question POST /agent/converse (``query``) and
#: NLWeb's POST /ask (``query.text``) take. Front doors do not import each other, so each states it.
MAX_PAYLOAD = 4096
#: The longest ``id`` an intent may carry (echoed as the response's ``request_id``), in characters: what the JSON
#: doors take of an identifier the client chooses (AHP's ``session_id``, IntentWeb's ``interaction_id``).
MAX_INTENT_ID = 128
#: The most numbers an ``intent_vector`` may hold: what POST /agent/converse takes in ``context.intent_vector``.
MAX_INTENT_VECTOR = 8192


class ProtobufParser(BaseParser):
    """The raw body, at most ``MAX_REQUEST_BYTES`` (the frame is decoded by the view, which refuses it in JSON)."""

    media_type = MEDIA_TYPE

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> bytes:
        request = (parser_context or {})["request"]._request
        try:
            body = request.body
        except RequestDataTooBig:
            body = None
        if body is None or len(body) > app_settings.MAX_REQUEST_BYTES:
            raise errors.TooLarge(f"The request body is over the {app_settings.MAX_REQUEST_BYTES}-byte cap.")
        return body


def error_response(error: errors.ConciergeError) -> JsonResponse:
    """AHP §10 JSON, the shape every refusal at this endpoint has."""
    body = {"status": "error", "code": error.code, "message": error.message, **error.details}
    return JsonResponse(body, status=error.status)


def framed(message: Message, **headers: str) -> HttpResponse:
    return HttpResponse(encode(message), content_type=MEDIA_TYPE, headers=headers)


def refused(exc: handshake.HandshakeRefused) -> errors.ConciergeError:
    fields = [exc.field] if exc.field else []
    if exc.status == 403:
        return errors.Forbidden(exc.message, code=exc.code)
    return errors.AuthRequired(exc.message, code=exc.code, fields=fields)


def check_capabilities(names: Sequence[str]) -> None:
    """``capabilities`` as POST /agent/handshake takes them, else the same refusal (400 ``invalid_request``)."""
    if len(names) > MAX_CAPABILITIES or any(len(name) > MAX_CAPABILITY_NAME for name in names):
        raise errors.InvalidInput(
            f"capabilities must be a list of at most {MAX_CAPABILITIES} names of at most {MAX_CAPABILITY_NAME} "
            "characters.",
            fields=["capabilities"],
        )


def replay_key(intent: asp_pb2.IntentMessage) -> str:
    """What a signed intent is kept under in the replay cache (:mod:`agent_handshake.identity.signed_intents`)."""
    return hashlib.sha256(signing.INTENT_DOMAIN + intent.signature).hexdigest()


def replayed() -> errors.AuthRequired:
    return errors.AuthRequired(
        "This signed intent was already received (replay): send a new id and timestamp.", code="replayed"
    )


@contextlib.contextmanager
def answered_once(intent: asp_pb2.IntentMessage, refused: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Spend ``intent``'s signature for the work inside, and give it back if that work is refused or fails: a signed
    intent is answered at most once, and one refused before it was answered (429, 503, 403, 400) may be sent again
    unchanged, as its refusal says. Only the request that spent a signature gives it back, so a replay of an
    answered intent stays refused whatever refusal the replay provokes. ``refused`` is called before a copy that
    finds the signature spent is refused (to count it)."""
    seen = replay_key(intent)
    if not signed_intents.spend(seen):
        refused()
        raise replayed()  # a copy sent at the same time was taken first
    try:
        yield
    except Exception:
        signed_intents.give_back(seen)  # (if the database is what failed, it stays spent: never answered twice)
        raise


def fresh(timestamp_ns: int, name: str) -> None:
    skew = app_settings.SIGNATURE_MAX_SKEW
    if not timestamp_ns or abs(time.time() - timestamp_ns / NS) > skew:
        raise errors.AuthRequired(
            f"{name} must be Unix nanoseconds within {skew} seconds of the server's clock.",
            code="stale_timestamp",
            fields=[name],
        )


OPERATION = {
    "operation_id": "agent_semantic_protocol",
    "summary": "Agent Semantic Protocol: a framed protobuf HandshakeMessage or signed IntentMessage",
    "description": (
        "One Agent Semantic Protocol frame (4-byte big-endian length, type byte, protobuf payload): a "
        "HandshakeMessage (0x01) answered by the site's HandshakeMessage, or a signed IntentMessage (0x02) answered "
        "by a signed NegotiationResponse (0x03). Errors are AHP §10 JSON."
    ),
    # application/octet-stream too: the same frame under a generic name (what generic HTTP clients and fuzzers send).
    "request": {MEDIA_TYPE: OpenApiTypes.BINARY, "application/octet-stream": OpenApiTypes.BINARY},
    "responses": {
        (200, MEDIA_TYPE): OpenApiResponse(OpenApiTypes.BINARY, description="One frame."),
        **{
            (status, "application/json"): OpenApiResponse(
                {"$ref": "#/components/schemas/AHPError"}, description="A §10 error."
            )
            for status in (400, 401, 403, 413, 415, 429, 503)
        },
    },
    "tags": ["Agent Semantic Protocol"],
    "auth": [],
}


class AgentSemanticProtocolView(FrontDoorView):
    """``POST /agent/asp``: one framed message in, one framed message (or a §10 JSON error) out."""

    parser_classes = [ProtobufParser]
    #: An intent authenticates by its own signature, a handshake by its challenges: no header credentials.
    authentication_classes: list = []
    lazy_authentication = True
    http_method_names = ["post", "options"]

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return error_response(error)

    def initialize_request(self, request: Any, *args: Any, **kwargs: Any) -> Request:
        if not request.META.get("CONTENT_TYPE"):
            request.META["CONTENT_TYPE"] = MEDIA_TYPE
        return super().initialize_request(request, *args, **kwargs)

    @described(**OPERATION)
    def post(self, request: Request) -> HttpResponseBase:
        try:
            kind, message = self.message(request)
            credentials = self.signer(message) if kind is MessageType.INTENT else None
        except Exception:
            self.count(request)  # a refused message counts against the sender's network
            raise
        if kind is MessageType.INTENT:
            assert credentials is not None
            # Spent before the request is the agent's: a copy sent while the original is answered is a replay,
            # counted against the sender's network, and moves neither the agent's trust nor its own limit.
            with answered_once(message, refused=lambda: self.count(request)):
                request.user, request.auth = AgentUser(credentials), credentials
                # Refused for the rate (or its payload) below, the signature is given back: sent again, it is
                # answered.
                self.count(request)
                return self.intent(request, message, credentials, self.question(message))
        self.count(request)
        if kind is MessageType.HANDSHAKE:
            return self.handshake(request, message)
        raise errors.InvalidInput(
            f"POST /agent/asp takes HandshakeMessage (0x01) and IntentMessage (0x02) frames, not 0x{kind:02x} "
            f"({type(message).DESCRIPTOR.name}).",
            code="unsupported_message_type",
        )

    def message(self, request: Request) -> tuple[MessageType, Message]:
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if content_type not in MEDIA_TYPES:
            raise errors.ConciergeError(
                f"The body must be one Agent Semantic Protocol frame, Content-Type: {MEDIA_TYPE}.",
                code="unsupported_media_type",
                status=415,
            )
        try:
            return decode(request.data)
        except FrameError as exc:
            raise errors.InvalidInput(exc.message, code=exc.code) from None

    # --- 0x01 HandshakeMessage ------------------------------------------------------------------------------

    def handshake(self, request: Request, message: asp_pb2.HandshakeMessage) -> HttpResponseBase:
        """The first message (no ``challenge_response``) begins the handshake, the second completes it."""
        if len(message.did) > 100:
            raise errors.InvalidInput("did is longer than 100 characters.", fields=["did"])
        # Protobuf strings may hold NUL, which no text column can (the JSON doors refuse it in their parser).
        for name, values in (("did", [message.did]), ("agent_id", [message.agent_id]),
                             ("capabilities", message.capabilities)):  # fmt: skip
            if any(unstorable(value) for value in values):
                raise errors.InvalidInput(f"{name} {UNSTORABLE_MESSAGE}", fields=[name])
        try:
            if not message.challenge_response:
                return self.begin(request, message)
            return self.complete(request, message)
        except handshake.HandshakeRefused as exc:
            raise refused(exc) from None

    def begin(self, request: Request, message: asp_pb2.HandshakeMessage) -> HttpResponseBase:
        if len(message.agent_id) > MAX_AGENT_ID:
            raise errors.InvalidInput(
                f"agent_id must be a string of at most {MAX_AGENT_ID} characters.", fields=["agent_id"]
            )
        check_capabilities(message.capabilities)
        if len(message.public_key) != 32:
            raise errors.InvalidInput("public_key must be the 32-byte Ed25519 key.", fields=["public_key"])
        if len(message.challenge) != CHALLENGE_BYTES:
            raise errors.InvalidInput(f"challenge must be {CHALLENGE_BYTES} random bytes.", fields=["challenge"])
        hello = handshake.Hello(
            did=message.did,
            public_key=message.public_key,
            challenge=message.challenge,
            agent_id=message.agent_id,
            capabilities=list(message.capabilities),
            # Unix nanoseconds on the wire (§4); 0 is proto3's "not sent".
            timestamp=message.timestamp // NS if message.timestamp else None,
        )
        answer = handshake.begin(hello)
        return framed(
            asp_pb2.HandshakeMessage(
                agent_id=base_url(request) + "/",
                did=answer.did,
                capabilities=[capability.name for capability in capability_registry.available()],
                version=handshake.VERSION,
                timestamp=time.time_ns(),
                public_key=answer.public_key,
                challenge=answer.challenge,
                challenge_response=answer.challenge_response,
            ),
            **{"Cache-Control": "no-store"},
        )

    def complete(self, request: Request, message: asp_pb2.HandshakeMessage) -> HttpResponseBase:
        if len(message.challenge) != CHALLENGE_BYTES:
            raise errors.InvalidInput(
                f"challenge must echo the site's {CHALLENGE_BYTES}-byte challenge.", fields=["challenge"]
            )
        if len(message.challenge_response) != SIGNATURE_BYTES:
            raise errors.InvalidInput(
                f"challenge_response must be a {SIGNATURE_BYTES}-byte Ed25519 signature.", fields=["challenge_response"]
            )
        session = handshake.complete_for_challenge(message.did, message.challenge, message.challenge_response)
        return framed(
            asp_pb2.HandshakeMessage(
                agent_id=base_url(request) + "/",  # the site's, as in its first answer (the message is the site's)
                did=site_did(),
                version=handshake.VERSION,
                timestamp=time.time_ns(),
                public_key=site_public_key_bytes(),
                access_token=session.token,
                expires_in=session.expires_in,
            ),
            **{"Cache-Control": "no-store"},
        )

    # --- 0x02 IntentMessage ---------------------------------------------------------------------------------

    def signer(self, intent: asp_pb2.IntentMessage) -> Credentials:
        """The credentials of the verified agent that signed ``intent``, or the refusal (401; 403 ``blocked``,
        ``key_revoked``, ``key_expired``, ``client_inactive``).

        The signature is not spent here (:func:`answered_once` spends it for the work): an intent refused on the way
        may be sent again. A replay of one already answered is refused here, counted against the sender's network,
        not against the agent whose message it is."""
        if not intent.signature:
            raise errors.AuthRequired(
                "An IntentMessage must be signed (field 9; see the signed bytes in agent_handshake.asp.signing).",
                code="signature_required",
                fields=["signature"],
            )
        agent = signed_intents.signer(intent.did) if intent.did and not unstorable(intent.did) else None
        if agent is None:
            raise errors.AuthRequired(
                "The sender's DID is not a verified agent here: complete a handshake first (HandshakeMessage, 0x01).",
                code="unverified_did",
                fields=["did"],
            )
        if not signing.verify_message(intent, agent.public_key):
            raise errors.AuthRequired(
                "signature is not the DID key's Ed25519 signature of 'agent-handshake/asp-intent/v1' 0x00 + the "
                "message serialized deterministically without its signature.",
                code="signature_invalid",
                fields=["signature"],
            )
        fresh(intent.timestamp, "timestamp")
        withdrawn = handshake.refusal_of(agent)  # blocked, or its own key or client withdrawn by an operator
        if withdrawn is not None:
            raise errors.Forbidden(withdrawn.message, code=withdrawn.code)
        if signed_intents.seen(replay_key(intent)):
            raise replayed()
        key = agent.key
        key.scopes = trust.scopes_of(agent)
        return Credentials(key, "asp_signature", agent, trust.tier_of(agent.trust).rate_limits)

    def question(self, intent: asp_pb2.IntentMessage) -> str:
        """The request ``intent`` puts in words, or the refusal the JSON front doors give such a question (400)."""
        if len(intent.id) > MAX_INTENT_ID:
            raise errors.InvalidInput(f"id is over {MAX_INTENT_ID} characters.", fields=["id"])
        if len(intent.intent_vector) > MAX_INTENT_VECTOR:
            raise errors.InvalidInput(
                f"intent_vector holds over {MAX_INTENT_VECTOR} numbers.", fields=["intent_vector"]
            )
        if len(intent.payload) > MAX_PAYLOAD:
            raise errors.InvalidInput(f"payload is over {MAX_PAYLOAD} characters.", fields=["payload"])
        text = intent.payload.strip()
        if not any(char.isalnum() for char in text) or unstorable(text):
            raise errors.InvalidInput(
                "payload must be the request in words (at least one letter or digit).", fields=["payload"]
            )
        check_capabilities(intent.capabilities)
        return text

    def intent(
        self, request: Request, intent: asp_pb2.IntentMessage, credentials: Credentials, text: str
    ) -> HttpResponseBase:
        agent = credentials.agent
        assert agent is not None
        capability, reason = self.choose(intent, text)
        response = asp_pb2.NegotiationResponse(
            request_id=intent.id,
            agent_id=base_url(request) + "/",
            did=site_did(),
            timestamp=time.time_ns(),
        )
        if capability is None:
            response.reason = reason
        elif capability.action_type is not None:
            response.reason = (
                f"{capability.name} is an action; this binding answers questions only. Call it with JSON: POST "
                f"/agent/converse (AHP) or POST /capabilities/{capability.name}, with the session credential of your "
                "handshake as Authorization: Bearer."
            )
            response.workflow_steps.append(capability.name)
        else:
            authorize(capability, credentials)  # a scoped question needs its scope here too (403), as on AHP
            owner = Owner.of(credentials, client_address(request._request))
            question = Question(capability=capability, text=text, requesting_agent=(agent.agent_id or agent.did)[:200])
            turn = converse(question, owner)
            response.workflow_steps.append(capability.name)
            if turn.reply is not None:
                response.accepted = True
                response.reason = turn.reply.answer
            else:
                assert turn.clarification is not None
                options = "; ".join(turn.clarification.options or [])
                response.reason = (
                    f"The site needs a clarification: {turn.clarification.question}"
                    + (f" ({options})" if options else "")
                    + " Send a new intent that says which."
                )
        # The change this intent makes to the agent's trust (§6.4): up for an accepted one, down for one that is not
        # (no capability fits, an action, a clarification), so that a flood of intents the site cannot accept
        # lowers an agent's trust instead of raising it. The front door applies the same (``declined``), clamped to
        # [0, 1]: an agent at the ceiling is told 0, not +0.05 (its trust as this request read it).
        self.declined = not response.accepted
        response.trust_delta = 0.0 if agent.pinned else trust.change_of(agent.trust, response.accepted)
        return framed(signing.sign_as_site(response))

    def choose(self, intent: asp_pb2.IntentMessage, text: str) -> tuple[Capability | None, str]:
        """The capability ``intent`` is for, or None and the reason (a required capability the site lacks, no
        clear route)."""
        capabilities = answering_capabilities()
        names = {capability.name for capability in capabilities}
        required = list(dict.fromkeys(intent.capabilities))
        if required:
            missing = [name for name in required if name not in names]
            if missing:
                return None, (
                    f"This site does not offer {', '.join(missing)[:300]}; its capabilities are "
                    f"{', '.join(sorted(names))} (GET /.well-known/agent.json)."
                )
            capabilities = [capability for capability in capabilities if capability.name in required]
            if len(capabilities) == 1:
                return capabilities[0], ""
        # The intent vector may come from another model (the protocol does not say): used only when it fits ours.
        found = route_text(text, capabilities, usable_intent_vector(list(intent.intent_vector)))
        if found.chosen is None:
            options = ", ".join(capability.name for capability in found.candidates[:4])
            return None, (
                "No capability clearly fits this intent"
                + (f" (candidates: {options})" if options else "")
                + ": name one in capabilities, or use the JSON endpoints (POST /agent/converse), which can ask which "
                "one you meant."
            )
        return found.chosen, ""
