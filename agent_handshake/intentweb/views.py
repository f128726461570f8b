"""IntentWeb 1.0 over HTTP: ``POST /intent``, the ``intent_endpoint`` of ``/intentmanifest.yaml`` (which is served
with the other generated documents, :class:`agent_handshake.views.IntentManifestView`).

``POST /intent`` is a :class:`~agent_handshake.frontdoor.FrontDoorView` (the body cap, the credentials, the rate
limits and their headers are every door's). Before an envelope reaches its interaction (:mod:`.flows`):

- it is validated (:mod:`.envelope`);
- its ``attribution.timestamp`` must be within ``INTENT_MAX_SKEW`` seconds of the server's clock, and its
  ``nonce`` never accepted before (a table, so every process agrees; written in the transaction of the work the
  message does): otherwise 401 ``stale_timestamp`` or ``replayed_nonce``;
- each chain entry whose ``actor_id`` has a key an operator registered (``TrustedActorKey`` in the admin) must
  carry that key's signature over the attribution profile's payload, else 401 ``signature_invalid``, and a
  ``timestamp`` (the time it signed) within ``INTENT_MAX_SKEW`` too, else 401 ``stale_timestamp``; entries of
  other actors are accepted and reported as unverified in the response's ``explicability``;
- only then is its ``callback_url``'s host resolved (for the SSRF check), before the message's transaction: the
  nonce and signatures are checked first (read-only, :func:`screen`), so a replayed or forged message costs no DNS
  lookup.

Every response is an envelope signed by the site: its own nonce and time, and one chain entry (``actor_type``
``intent_site``, ``actor_id`` the endpoint's URL) signed with the site's key, whose public half the manifests
publish. A refusal is an ``error`` envelope with ``status`` naming it and the matching 4xx. While the site's key does
not load (system check E013 says why), nothing can be signed: every message is answered 503
``site_key_unavailable``, the plain JSON error of a server-side problem (AHP §10's shape, as
``/intentmanifest.yaml`` answers then), before anything is read or stored.
"""

from __future__ import annotations

import datetime
import functools
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import reverse
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from ..concierge import errors, interaction_admission, interactions
from ..concierge.interaction_admission import database
from ..conf import app_settings
from ..frontdoor import FrontDoorView, described
from ..hosts import base_url
from ..identity.site_key import public_key_from_b64url, site_private_key
from ..registry import INTENTWEB_VERSION
from . import attribution, flows
from .envelope import Envelope, parse, parse_time, spoken
from .openapi import INTENT

if TYPE_CHECKING:
    from ..models import Interaction, Job

logger = logging.getLogger(__name__)

SITE_ACTOR_TYPE = "intent_site"
SITE_KEY_UNAVAILABLE = "site_key_unavailable"


def key_unavailable(cannot: str) -> errors.Unavailable:
    """The refusal of an IntentWeb endpoint whose answer needs the site's key while it does not load; ``cannot``
    says what cannot be done."""
    return errors.Unavailable(
        f"The site's signing key is unavailable, so {cannot} right now.", code=SITE_KEY_UNAVAILABLE
    )


def unsigned_error(error: errors.ConciergeError) -> JsonResponse:
    """An error the site cannot sign (no envelope: its chain entry would need the key), as the JSON error every door
    gives a server-side problem: ``{"status": "error", "code", "message"}`` with the error's status."""
    return JsonResponse({"status": "error", "code": error.code, "message": error.message}, status=error.status)


def now_iso() -> str:
    return timezone.now().astimezone(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def signed(
    reply: dict[str, Any],
    *,
    interaction_id: str,
    query_hash: str,
    endpoint: str,
    explicability: list[dict[str, Any]] | None = None,
    protocol_version: str = INTENTWEB_VERSION,
) -> dict[str, Any]:
    """``reply`` (flow_type, message, status and extra fields) as an envelope the site signs, in
    ``protocol_version``: the message's, a 1.x we speak (§3.3 "Same as request")."""
    moment, nonce = now_iso(), secrets.token_urlsafe(18)
    entry = attribution.sign_entry(
        site_private_key(),
        actor_type=SITE_ACTOR_TYPE,
        actor_id=endpoint,
        query_hash=query_hash,
        nonce=nonce,
        timestamp=moment,
    )
    body = {
        "protocol_version": protocol_version,
        "flow_type": reply["flow_type"],
        "message": reply["message"],
        "interaction_id": interaction_id,
        **{key: value for key, value in reply.items() if key not in ("flow_type", "message")},
        "attribution": {"query_hash": query_hash, "nonce": nonce, "timestamp": moment, "chain": [entry]},
        "timestamp": moment,
    }
    if explicability:
        body["explicability"] = explicability
    return body


#: The most a refusal repeats, whatever made it: the concierge's checks may quote what the client sent (a field path
#: naming its keys, a callback URL's host) at any length.
MAX_MESSAGE = 1000
MAX_FIELD = 200


def bounded(message: str) -> str:
    """``message`` in at most :data:`MAX_MESSAGE` characters: its start and its end (which says what is wrong with
    what it quotes), the middle cut."""
    if len(message) <= MAX_MESSAGE:
        return message
    half = (MAX_MESSAGE - 1) // 2
    return message[:half] + "…" + message[-half:]


def endpoint_of(request: HttpRequest) -> str:
    """The site's ``actor_id`` in its replies to ``request``: its intent endpoint, where the request reached it."""
    return base_url(request) + reverse("agent_handshake:intent")


def site_endpoint() -> str:
    """The site's actor_id with no request to read the host from: ``BASE_URL``'s intent endpoint, else its path
    alone."""
    return app_settings.BASE_URL.rstrip("/") + reverse("agent_handshake:intent")


# --- chain of custody -------------------------------------------------------------------------------------------


def check_fresh(envelope: Envelope) -> None:
    skew = abs((timezone.now() - envelope.sent_at).total_seconds())
    if skew > app_settings.INTENT_MAX_SKEW:
        raise errors.AuthRequired(
            f"attribution.timestamp is {int(skew)} seconds from the server's clock (at most "
            f"{app_settings.INTENT_MAX_SKEW} are accepted).",
            code="stale_timestamp",
            fields=["attribution.timestamp"],
        )


@functools.lru_cache(maxsize=256)
def registered_key(text: str) -> Ed25519PublicKey:
    """A registered key's public-key object, loaded once per key: the cache is keyed by the key itself, so a changed
    key is another entry; ValueError for a malformed one (not cached)."""
    return public_key_from_b64url(text)


@dataclass
class Admission:
    #: The actor_ids whose chain entries were verified with their registered key.
    verified: list[str]
    #: The message's interaction, locked; None if its interaction_id has none.
    interaction: Interaction | None


def admit(envelope: Envelope, alias: str) -> Admission:
    """Spend the envelope's nonce, check its chain and lock its interaction, in the message's transaction on
    ``alias`` (:meth:`IntentView.process`), which a refusal leaves, rolled back: a refused message spends no nonce.
    An entry of a registered actor with a wrong signature is refused, and so is a nonce accepted before
    (:mod:`agent_handshake.concierge.interaction_admission`)."""
    nonce = envelope.attribution["nonce"]
    admitted = interaction_admission.admit(nonce, actors_of(envelope), envelope.interaction_id, alias)
    verified = verify_chain(envelope, admitted.keys)
    if not admitted.fresh:
        raise replayed()
    return Admission(verified, admitted.interaction)


def screen(envelope: Envelope, alias: str) -> None:
    """:func:`admit`'s refusals, before a slow step that comes before the message's transaction (its
    ``callback_url``'s DNS lookup): a replayed message, or one whose signature does not verify, costs one read, not a
    lookup of a name server its sender chooses. Read-only: :func:`admit` still decides, in the transaction (a nonce
    spent meanwhile is refused there)."""
    screened = interaction_admission.screen(envelope.attribution["nonce"], actors_of(envelope), alias)
    verify_chain(envelope, screened.keys)
    if screened.spent:
        raise replayed()


def actors_of(envelope: Envelope) -> list[str]:
    return sorted({entry["actor_id"] for entry in envelope.chain})


def replayed() -> errors.AuthRequired:
    return errors.AuthRequired(
        "This attribution.nonce was already used: every message needs a new one.",
        code="replayed_nonce",
        fields=["attribution.nonce"],
    )


def verify_chain(envelope: Envelope, keys: dict[str, str]) -> list[str]:
    """The actor_ids whose entries were verified against their registered key in ``keys`` (actor_id: base64url
    public key); a registered key's actor with a wrong signature is refused."""
    verified = []
    for index, entry in enumerate(envelope.chain):
        registered = keys.get(entry["actor_id"])
        if registered is None:
            continue
        try:
            public_key = registered_key(registered)
        except ValueError:
            raise errors.Failed("A registered actor key is malformed; the error was logged.") from None
        if not attribution.verify_entry(
            entry, query_hash=envelope.attribution["query_hash"], nonce=envelope.attribution["nonce"],
            public_key=public_key,
        ):  # fmt: skip
            raise errors.AuthRequired(
                f"The signature of chain entry {index} does not verify with the key registered for its actor_id "
                "(see the manifest's attribution profile).",
                code="signature_invalid",
                fields=[f"attribution.chain.{index}.signature"],
            )
        # The signature covers the entry's time, not attribution.timestamp (anyone may change that): without this,
        # a signed message could be sent again, with a new attribution.timestamp, once its nonce is forgotten.
        skew = abs((timezone.now() - parse_time(entry["timestamp"], "")).total_seconds())
        if skew > app_settings.INTENT_MAX_SKEW:
            raise errors.AuthRequired(
                f"Chain entry {index} was signed {int(skew)} seconds from the server's clock (at most "
                f"{app_settings.INTENT_MAX_SKEW} are accepted).",
                code="stale_timestamp",
                fields=[f"attribution.chain.{index}.timestamp"],
            )
        verified.append(entry["actor_id"])
    return verified


# --- the views --------------------------------------------------------------------------------------------------


class IntentView(FrontDoorView):
    """``POST /intent`` (see the module docstring and :mod:`.flows`)."""

    http_method_names = ["post", "options"]
    #: The turn a message runs (the intent page's calls count per client address).
    turn_class: type[flows.Turn] = flows.Turn

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Every answer is signed: without the key there is none to give, so refuse before the message is read,
        # counted or stored (a 500 at the end would have spent its nonce and kept its interaction). A preflight
        # signs nothing.
        if request.method != "OPTIONS":
            try:
                site_private_key()
            except ImproperlyConfigured:
                logger.exception("The site key cannot be loaded: %s answers 503", request.path[:200])
                raise key_unavailable("its IntentWeb messages cannot be answered") from None
        super().initial(request, *args, **kwargs)

    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        if error.code == SITE_KEY_UNAVAILABLE:
            return unsigned_error(error)
        data = getattr(self.request, "_full_data", None)
        data = data if isinstance(data, dict) else {}
        interaction_id = data.get("interaction_id") if isinstance(data.get("interaction_id"), str) else ""
        given = (data.get("attribution") or {}) if isinstance(data.get("attribution"), dict) else {}
        query_hash = given.get("query_hash") if isinstance(given.get("query_hash"), str) else ""
        reply: dict[str, Any] = {"flow_type": "error", "message": bounded(error.message), "status": error.code}
        if fields := error.details.get("fields"):
            reply["fields"] = [flows.cut(str(name), MAX_FIELD) for name in fields]
        body = signed(
            reply,
            interaction_id=interaction_id[:128],
            query_hash=query_hash[:64],
            endpoint=endpoint_of(self.request._request),
            protocol_version=spoken(data.get("protocol_version")) or INTENTWEB_VERSION,
        )
        return Response(body, status=error.status)

    @described(**INTENT)
    def post(self, request: Request) -> HttpResponseBase:
        return self.process(request, request.data)

    def process(self, request: Request, data: Any) -> Response:
        """One envelope, from the checks of the module docstring to the signed answer."""
        envelope = parse(data)
        check_fresh(envelope)
        endpoint = endpoint_of(request._request)
        turn = self.turn_class(request, envelope, endpoint)
        alias = database()
        if envelope.callback_url:
            screen(envelope, alias)  # the nonce and the signatures first: a refused message resolves nothing
            turn.check_callback()  # before the transaction: no row lock waits on DNS
        # One transaction: the nonce is spent with the work it allowed (a refused message spends nothing and
        # changes nothing; the same message refused again is no replay of anything). Neither step opens a
        # savepoint of its own: a refusal leaves this block, which rolls all of it back.
        with transaction.atomic(using=alias):
            admission = admit(envelope, alias)
            turn.verified = admission.verified
            reply = turn.run(admission.interaction)
        self.counter.usages.extend(turn.usages)
        interaction = turn.interaction
        body = signed(
            reply.as_dict(),
            interaction_id=envelope.interaction_id,
            query_hash=interaction.query_hash if interaction else envelope.attribution["query_hash"],
            endpoint=endpoint,
            explicability=[explain(interaction, envelope, admission.verified)] if interaction else None,
            protocol_version=envelope.protocol_version,
        )
        response = Response(body, status=reply.http_status)
        if turn.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response


def explain(interaction: Interaction, envelope: Envelope, verified: list[str]) -> dict[str, Any]:
    """§6 for the site: how it read the intent, the capability it chose and with what confidence."""
    item: dict[str, Any] = {"actor": SITE_ACTOR_TYPE}
    capability = flows.capability_registry.get(interaction.capability) if interaction.capability else None
    if capability is not None:
        item["interpretation"] = f"You want to: {capability.intent_text.lower()} (capability {capability.name})."
        if interaction.confidence is not None:
            item["confidence"] = round(max(0.0, min(1.0, interaction.confidence)), 3)
            item["routing_logic"] = "The closest capability by meaning to the intent_request's message."
        else:
            item["routing_logic"] = "Chosen by the client from the capabilities offered."
    else:
        item["interpretation"] = "The intent could match more than one capability, or none clearly."
    # The actor_ids are the client's (up to 500 characters of anything): quoted, cut.
    assumptions = [f"Chain entry of {flows.quoted(actor)} verified with its registered key." for actor in verified]
    unverified = [entry["actor_id"] for entry in envelope.chain if entry["actor_id"] not in verified]
    assumptions += [f"Chain entry of {flows.quoted(actor)} not verified: no key registered for it."
                    for actor in unverified]  # fmt: skip
    if assumptions:
        item["assumptions"] = assumptions
    return item


def callback_body(job: Job) -> dict[str, Any]:
    """What an ``async`` capability's callback posts for an IntentWeb interaction: the envelope its next message
    would get (``execution_result`` or ``error``), signed.

    The interaction may be gone: deleted after ``INTENT_RETENTION_SECONDS`` without a message while its job waited
    (for an operator, say) or its callback was retried. The agent still asked to hear the job's outcome, and an
    ``error`` would tell it a booking that was made had failed, so it gets the same envelope as far as the job alone
    can form it: the ``interaction_id`` and ``query_hash`` went with the interaction, so they are empty (as
    :meth:`IntentView.render_error` sends them when it cannot read them), the version it was started in too (so it
    is the site's), its collected information is not sent again, ``external_id`` is the job's id, which the agent was
    given when the job was accepted, and the site signs as :func:`site_endpoint` (the host the client used went with
    the interaction too).

    Without the site key there is no envelope to send: :class:`~agent_handshake.concierge.errors.Unavailable`, on
    which the callback is tried again later, as for a receiver that cannot be reached (its message names the setting
    or file to fix, never the key)."""
    try:
        site_private_key()
    except ImproperlyConfigured as error:
        raise errors.Unavailable(f"the site key is unavailable: {error}", code=SITE_KEY_UNAVAILABLE) from None
    interaction = interactions.of_job(job)
    if interaction is None:
        # Unsaved: job_reply only sets its status and external_id.
        interaction = interactions.new(interaction_id="", query_hash="", endpoint=site_endpoint())
        reply = flows.job_reply(job, interaction)
        reply.fields["external_id"] = str(job.pk)
    else:
        reply = flows.job_reply(job, interaction)
    return signed(
        reply.as_dict(),
        interaction_id=interaction.interaction_id,
        query_hash=interaction.query_hash,
        endpoint=interaction.endpoint,
        protocol_version=interaction.protocol_version,  # the intent_request's (§3.3); gone with it: ours
    )
