"""The IntentWeb attribution profile we publish (§5): what ``query_hash`` is a hash of, and what a chain entry's
``signature`` signs.

The spec leaves both "implementation-defined", which means two implementations agree only if one says exactly
what it does. Ours, named in :data:`PROFILE` and published in the manifests:

- ``query_hash``: hex SHA-256 of the RFC 8785 (JCS) canonical JSON of the initial ``intent_request``'s four
  required content fields. JCS, not ``json.dumps``, because key order, whitespace, number formatting and
  escaping must come out the same in every language; the attribution and optional fields are left out, since
  they change from one message of an interaction to the next while the intent does not.
- ``signature``: Ed25519 over the JCS canonical JSON of ``{actor_id, nonce, query_hash, timestamp}``. A JSON
  object, not the concatenation the spec's example suggests, so no two different tuples give the same bytes.
- Keys and signatures in base64url without padding.

Published test vectors: ``vectors.json`` beside this module (``python -m agent_handshake.intentweb.vectors``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..identity.site_key import b64url, from_b64url

PROFILE: dict[str, str] = {
    "name": "ahp-intentweb-ed25519-jcs-v1",
    "query_hash": "hex SHA-256 of the RFC 8785 canonical JSON of the initial intent_request's protocol_version, "
    "flow_type, message and interaction_id",
    "signature": "Ed25519",
    "signed": "RFC 8785 canonical JSON of {actor_id, nonce, query_hash, timestamp} (the attribution's nonce and "
    "query_hash, the chain entry's actor_id and timestamp)",
    "encoding": "base64url without padding",
}

INITIAL_FIELDS = ("protocol_version", "flow_type", "message", "interaction_id")

SIGNATURE_BYTES = 64


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical JSON (UTF-8)."""
    return rfc8785.dumps(value)


def query_hash(initial_envelope: dict[str, Any]) -> str:
    """The ``query_hash`` of an interaction, from its initial ``intent_request`` (KeyError if a field is missing)."""
    return hashlib.sha256(canonical({name: initial_envelope[name] for name in INITIAL_FIELDS})).hexdigest()


def signed_payload(*, query_hash: str, nonce: str, timestamp: str, actor_id: str) -> bytes:
    """The bytes a chain entry's signature covers."""
    return canonical({"actor_id": actor_id, "nonce": nonce, "query_hash": query_hash, "timestamp": timestamp})


def sign_entry(
    private_key: Ed25519PrivateKey, *, actor_type: str, actor_id: str, query_hash: str, nonce: str, timestamp: str
) -> dict[str, str]:
    """A signed chain entry for a message whose attribution carries ``query_hash`` and ``nonce``."""
    payload = signed_payload(query_hash=query_hash, nonce=nonce, timestamp=timestamp, actor_id=actor_id)
    return {
        "actor_type": actor_type,
        "actor_id": actor_id,
        "timestamp": timestamp,
        "signature": b64url(private_key.sign(payload)),
    }


def verify_entry(entry: dict[str, Any], *, query_hash: str, nonce: str, public_key: Ed25519PublicKey) -> bool:
    """Whether ``entry`` is signed by ``public_key`` for this ``query_hash`` and ``nonce``.

    Entries come from the network: anything malformed (not a dict, missing or non-string fields, a signature that
    is not base64url of 64 bytes) is simply not a valid signature, so this returns False rather than raising.
    """
    if not isinstance(entry, dict):
        return False
    actor_id, timestamp, signature = entry.get("actor_id"), entry.get("timestamp"), entry.get("signature")
    if not all(isinstance(value, str) for value in (actor_id, timestamp, signature, query_hash, nonce)):
        return False
    try:
        raw = from_b64url(signature)
        if len(raw) != SIGNATURE_BYTES:
            return False
        payload = signed_payload(query_hash=query_hash, nonce=nonce, timestamp=timestamp, actor_id=actor_id)
        public_key.verify(raw, payload)
    except (InvalidSignature, ValueError):
        # ValueError also covers rfc8785's CanonicalizationError (e.g. lone surrogates in a string).
        return False
    return True
