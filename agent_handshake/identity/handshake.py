"""A mutual Ed25519 handshake that turns a DID into a short-lived session credential (Agent Semantic Protocol §5.1,
made mutual and domain-separated as NOTES.md decides), in no transport's words: ``ahp/handshake.py`` binds it to
JSON over HTTP, ``asp/`` to the protobuf framing.

1. :func:`begin`: the agent sends its DID, its public key and a 32-byte challenge. The DID must be the hash of the
   key, the challenge new (a replayed first message is refused), and the DID not blocked. The site answers with
   its own DID and public key, its signature over :func:`~.did.challenge_payload` of the agent's challenge
   (``responder``), and a challenge of its own, kept for ``DID_HANDSHAKE_SECONDS``.
2. :func:`complete`: the agent signs the site's challenge (``initiator``), naming the site DID of step 1's answer
   (kept with the pending handshake: the site key may rotate in between, or another worker hold another key). The
   signature is checked against the key the agent presented in step 1, the pending handshake is spent (once), and
   the agent gets an ``asp_...`` token
   for ``DID_SESSION_SECONDS``, which every front door accepts as ``Authorization: Bearer``
   (:mod:`.auth`). The first completed handshake of a DID makes its :class:`~agent_handshake.models.VerifiedAgent`.

Every refusal is a :class:`HandshakeRefused` with a stable ``code``: ``did_mismatch``, ``invalid_key``,
``invalid_challenge``, ``replayed_challenge``, ``stale_timestamp``, ``unknown_handshake``, ``expired_challenge``,
``signature_invalid`` (401) and ``blocked``, ``key_revoked``, ``key_expired``, ``client_inactive`` (403).
"""

from __future__ import annotations

import datetime
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..conf import app_settings
from ..models import AgentClient, AgentSession, ApiKey, PendingHandshake, SeenSignature, VerifiedAgent
from ..text import visible_name
from . import did as dids
from . import trust
from .site_key import b64url, site_did, site_private_key, site_public_key_bytes

TOKEN_PREFIX = "asp_"
VERSION = "1.0.0"
#: What an agent's challenge is kept under in the replay cache (:class:`~agent_handshake.models.SeenSignature`,
#: which holds request signatures too: the prefix keeps the two apart).
HELLO_DOMAIN = b"agent-handshake/asp-hello/v1\x00"


class HandshakeRefused(Exception):
    def __init__(self, code: str, message: str, status: int = 401, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.field = code, message, status, field


@dataclass
class Hello:
    """The agent's first message."""

    did: str
    public_key: bytes
    challenge: bytes
    agent_id: str = ""
    capabilities: list[str] = field(default_factory=list)
    #: Unix seconds; None when the transport carries none.
    timestamp: int | None = None


@dataclass
class Answer:
    """The site's reply to :class:`Hello`."""

    handshake_id: str
    did: str
    public_key: bytes
    challenge: bytes
    challenge_response: bytes
    expires_in: int
    timestamp: int


@dataclass
class Session:
    token: str
    expires_in: int
    agent: VerifiedAgent
    tier: trust.Tier


def check_binding(did: str, public_key: bytes) -> None:
    if len(public_key) != 32:
        raise HandshakeRefused("invalid_key", "public_key must be a 32-byte Ed25519 key.", field="public_key")
    if dids.small_order(public_key):
        raise HandshakeRefused(
            "invalid_key", "public_key is a point of small order, whose signatures anyone can make.", field="public_key"
        )
    if not dids.matches_key(did, public_key):
        raise HandshakeRefused(
            "did_mismatch",
            f"The DID is not the key's: expected {dids.DID_PREFIX}<hex SHA-256 of the 32-byte public key>.",
            field="did",
        )


#: An operator's refusal of a verified agent through its own API key or agent client (the admin's "revoke" action, an
#: expiry date, "active" unticked): ``ApiKey.refusal``'s reason -> the code (its queued jobs end with the same ones,
#: ``concierge/job_owners.py``) and why. A 403, as for a blocked DID: a new handshake cannot undo an operator's
#: decision.
WITHDRAWN = {
    "revoked": ("key_revoked", "its API key was revoked"),
    "expired": ("key_expired", "its API key has expired"),
    "client inactive": ("client_inactive", "its agent client is inactive"),
}


def refusal_of(agent: VerifiedAgent) -> HandshakeRefused | None:
    """Why the site's operators refuse ``agent`` now (403 ``blocked``, ``key_revoked``, ``key_expired`` or
    ``client_inactive``), or None. Every door asks this of a session credential (:mod:`.auth`) and of a signed intent
    (``asp/``), and the handshake of a known DID, so that no session is issued that every door would refuse."""
    if agent.blocked:
        return HandshakeRefused("blocked", "This DID is blocked by the site's operators.", status=403)
    reason = agent.key.refusal(timezone.now())
    if reason is None:
        return None
    code, why = WITHDRAWN.get(reason, ("key_revoked", f"its API key is {reason}"))
    return HandshakeRefused(
        code, f"This DID is refused by the site's operators: {why}. Ask them to restore it.", status=403
    )


def check_admitted(did: str) -> None:
    """Raise :func:`refusal_of` a DID the site knows (a DID's first handshake has no agent, key nor client yet)."""
    agent = VerifiedAgent.objects.select_related("key__client").filter(did=did).first()
    if agent is not None and (refusal := refusal_of(agent)) is not None:
        raise refusal


def begin(hello: Hello) -> Answer:
    """Step 1 (see the module docstring)."""
    check_binding(hello.did, hello.public_key)
    if len(hello.challenge) != dids.CHALLENGE_BYTES:
        raise HandshakeRefused("invalid_challenge", "challenge must be 32 random bytes.", field="challenge")
    skew = app_settings.SIGNATURE_MAX_SKEW
    # In integer nanoseconds: a JSON integer may be too large for a float (OverflowError, a 500).
    if hello.timestamp is not None and abs(time.time_ns() - hello.timestamp * 1_000_000_000) > skew * 1_000_000_000:
        raise HandshakeRefused(
            "stale_timestamp", f"timestamp is more than {skew} seconds from the server's clock.", field="timestamp"
        )
    check_admitted(hello.did)
    ours = site_did()
    challenge = secrets.token_bytes(dids.CHALLENGE_BYTES)
    lifetime = app_settings.DID_HANDSHAKE_SECONDS
    pending = PendingHandshake(
        id=secrets.token_urlsafe(24),
        did=hello.did,
        public_key=b64url(hello.public_key),
        # Self-declared, shown to operators (a verified agent's name in the admin): stored as it shows.
        agent_id=visible_name(hello.agent_id, 200),
        capabilities=[name for name in (visible_name(str(name), 100) for name in hello.capabilities[:50]) if name],
        challenge=b64url(challenge),
        agent_challenge=b64url(hello.challenge),
        site_did=ours,
        expires_at=timezone.now() + datetime.timedelta(seconds=lifetime),
    )
    try:
        with transaction.atomic():
            pending.save(force_insert=True)
            # The pending row goes when the handshake is completed (or expired and cleaned up), and with it the
            # unique agent_challenge: the replay cache keeps the challenge spent for twice the timestamp's skew,
            # by when a replayed first message (with its timestamp) is stale anyway.
            fresh = SeenSignature.spend(hashlib.sha256(HELLO_DOMAIN + hello.challenge).hexdigest())
            if not fresh:
                transaction.set_rollback(True)
    except IntegrityError:  # the challenge of a handshake still pending
        fresh = False
    if not fresh:
        raise HandshakeRefused(
            "replayed_challenge", "This challenge was already used: send a new random one.", field="challenge"
        )
    signed = site_private_key().sign(dids.challenge_payload("responder", ours, hello.did, hello.challenge))
    forget_expired()
    return Answer(pending.id, ours, site_public_key_bytes(), challenge, signed, lifetime, int(time.time()))


def complete(handshake_id: str, did: str, challenge_response: bytes) -> Session:
    """Step 2 (see the module docstring), naming the handshake by the id :func:`begin` gave."""
    return _complete(PendingHandshake.objects.filter(pk=handshake_id), did, challenge_response)


def complete_for_challenge(did: str, challenge: bytes, challenge_response: bytes) -> Session:
    """Step 2 for a transport whose messages carry no handshake id (the protobuf ``HandshakeMessage``): the agent
    names the handshake by echoing the site's challenge."""
    pending = PendingHandshake.objects.filter(did=did, challenge=b64url(challenge)) if len(challenge) == 32 else None
    try:
        return _complete(pending if pending is not None else PendingHandshake.objects.none(), did, challenge_response)
    except HandshakeRefused as exc:
        if exc.code != "unknown_handshake":
            raise
        # The agent sent no handshake id: say what it did send that named none.
        raise HandshakeRefused(
            "unknown_handshake",
            "No handshake of this DID is waiting for this challenge (used already?): echo the challenge of the "
            "site's answer to your first message.",
            field="challenge",
        ) from None


def _complete(candidates: Any, did: str, challenge_response: bytes) -> Session:
    with transaction.atomic():
        pending = candidates.select_for_update().first()
        if pending is None:
            raise HandshakeRefused(
                "unknown_handshake", "No handshake is waiting under this id (used already?).", field="handshake_id"
            )
        if pending.did != did:
            raise HandshakeRefused("did_mismatch", "did is not the DID that began this handshake.", field="did")
        if pending.expires_at <= timezone.now():
            raise HandshakeRefused("expired_challenge", "The challenge expired: begin a new handshake.")
        # The agent signs the site DID of the answer it got, whatever key the site (or this worker) holds now.
        peer = pending.site_did or site_did()
        payload = dids.challenge_payload("initiator", did, peer, dids.decode(pending.challenge, 32) or b"")
        if not dids.verify(pending.public_key, challenge_response, payload):
            raise HandshakeRefused(
                "signature_invalid",
                "challenge_response is not the DID key's signature of the site's challenge (see the handshake's "
                "signed bytes in the README).",
                field="challenge_response",
            )
        pending.delete()  # spent: the same answer cannot be used twice
        check_admitted(did)
        agent = verified_agent(pending)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        lifetime = app_settings.DID_SESSION_SECONDS
        AgentSession.objects.create(
            agent=agent, token_hash=token_hash(token), expires_at=timezone.now() + datetime.timedelta(seconds=lifetime)
        )
    return Session(token, lifetime, agent, trust.tier_of(agent.trust))


def verified_agent(pending: PendingHandshake) -> VerifiedAgent:
    """The DID's :class:`VerifiedAgent`, made on its first completed handshake (with the API key its requests are
    counted and owned by: no one holds its secret)."""
    agent = VerifiedAgent.objects.filter(did=pending.did).first()
    if agent is None:
        client = client_of_its_own(pending.did)
        key, _secret = ApiKey.objects.issue(client, name="verified DID", scopes=[])
        try:
            with transaction.atomic():
                agent = VerifiedAgent.objects.create(did=pending.did, public_key=pending.public_key, key=key)
        except IntegrityError:  # another handshake of the same DID made it first
            client.delete()  # and its key
            agent = VerifiedAgent.objects.get(did=pending.did)
    agent.agent_id = pending.agent_id or agent.agent_id
    agent.capabilities = pending.capabilities or agent.capabilities
    agent.last_seen_at = timezone.now()
    agent.save(update_fields=["agent_id", "capabilities", "last_seen_at"])
    return agent


def client_of_its_own(did: str) -> AgentClient:
    """A new client for a DID's verified agent, named by the DID, or by the DID and a number when a client has that
    name already (one an operator created or renamed, or that of a verified agent since deleted): never that client,
    whose activity, contact and other keys are not this agent's."""
    number = 1
    while True:
        name = did if number == 1 else f"{did} ({number})"
        try:
            with transaction.atomic():
                return AgentClient.objects.create(
                    name=name, description="A verified agent (its DID): made by its first handshake."
                )
        except IntegrityError:  # the name is taken
            number += 1


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def session_agent(token: str) -> VerifiedAgent | None:
    """The verified agent a live session token stands for, or None."""
    session = (
        AgentSession.objects.select_related("agent__key__client")
        .filter(token_hash=token_hash(token), expires_at__gt=timezone.now())
        .first()
    )
    return session.agent if session is not None else None


def forget_expired() -> None:
    """Now and then, delete pending handshakes and sessions past their time."""
    if secrets.randbelow(50):
        return
    now = timezone.now()
    PendingHandshake.objects.filter(expires_at__lt=now).delete()
    AgentSession.objects.filter(expires_at__lt=now).delete()
