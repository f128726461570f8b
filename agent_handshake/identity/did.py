"""Agent Semantic Protocol identities: ``did:agent-semantic-protocol:<hex(sha256(public key))>`` bound to an Ed25519
key, and what each side of a handshake signs.

The upstream handshake signs the raw 32 challenge bytes, so a signature made for one purpose (or one peer) could be
replayed for another. Ours (NOTES.md: mutual, domain-separated) signs :func:`challenge_payload`::

    b"agent-handshake/asp-handshake/v1" 0x00 <role> 0x00 <signer DID> 0x00 <peer DID> 0x00 <32-byte challenge>

``role`` is ``responder`` when the site signs the agent's challenge and ``initiator`` when the agent signs the
site's: a signature is good for one direction of one handshake between two named parties. Keys and signatures
travel as base64url without padding (:func:`~.site_key.b64url`).
"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .site_key import DID_PREFIX, did_of, from_b64url, public_key_from_b64url

DOMAIN = b"agent-handshake/asp-handshake/v1"
ROLES = ("initiator", "responder")
CHALLENGE_BYTES = 32
SIGNATURE_BYTES = 64

__all__ = ["DID_PREFIX", "challenge_payload", "did_of", "matches_key", "small_order", "verify"]

_P = 2**255 - 19
#: The y coordinates (mod p) of the eight points of small order: 1 (the neutral point), p - 1 (order 2), 0 (order 4)
#: and the two of order 8 (libsodium's blocklist, ``has_small_order``).
_ORDER_8_Y = 2707385501144840649318225287225658788936804267575313519463743609750303402022
SMALL_ORDER_Y = frozenset({0, 1, _P - 1, _ORDER_8_Y, _P - _ORDER_8_Y})


def matches_key(did: str, public_key: bytes) -> bool:
    """Whether ``did`` is the DID of the 32-byte Ed25519 ``public_key``."""
    return len(public_key) == 32 and did == DID_PREFIX + hashlib.sha256(public_key).hexdigest()


def small_order(public_key: bytes) -> bool:
    """Whether the 32-byte ``public_key`` encodes a point of small order: for such a key, signatures anyone can make
    verify (with the neutral point, R = the neutral point and S = 0 verify for every message), so it proves nothing."""
    y = int.from_bytes(public_key, "little") & ((1 << 255) - 1)  # the top bit is the sign of x
    return y % _P in SMALL_ORDER_Y


def challenge_payload(role: str, signer_did: str, peer_did: str, challenge: bytes) -> bytes:
    """The bytes a handshake signature covers (see the module docstring)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    if len(challenge) != CHALLENGE_BYTES:
        raise ValueError(f"a challenge is {CHALLENGE_BYTES} bytes")
    return b"\x00".join([DOMAIN, role.encode(), signer_did.encode(), peer_did.encode(), challenge])


def verify(public_key: bytes | str | Ed25519PublicKey, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s Ed25519 signature of ``data`` (never raises on bad input)."""
    try:
        if isinstance(public_key, str):
            public_key = public_key_from_b64url(public_key)
        elif isinstance(public_key, bytes):
            public_key = Ed25519PublicKey.from_public_bytes(public_key)
        public_key.verify(signature, data)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def decode(text: object, size: int) -> bytes | None:
    """``size`` bytes from base64url text, or None."""
    if not isinstance(text, str):
        return None
    try:
        raw = from_b64url(text)
    except ValueError:
        return None
    return raw if len(raw) == size else None
