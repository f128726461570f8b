"""Interoperability test vectors for our IntentWeb attribution profile (:data:`.attribution.PROFILE`).

Another implementation checks itself against ``vectors.json`` (beside this module) without running ours. Every
value is derived from fixed seeds and fixed envelopes, and Ed25519 signatures are deterministic (RFC 8032), so
:func:`build` gives the same bytes on every run; ``python -m agent_handshake.intentweb.vectors`` rewrites the
file, and a test fails when the file and :func:`build` disagree.

The messages are chosen so that a shortcut shows: non-ASCII text (JCS writes it as UTF-8, ``json.dumps`` escapes
it by default), quotes, a newline, a control character and a character outside the Basic Multilingual Plane.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..identity.site_key import b64url, did_of
from .attribution import INITIAL_FIELDS, PROFILE, canonical, query_hash, sign_entry, signed_payload

PATH = Path(__file__).with_name("vectors.json")

ACTORS: dict[str, dict[str, Any]] = {
    "agent": {"seed": bytes(range(32)), "actor_type": "ai_agent", "actor_id": "personal-assistant-v2"},
    "gateway": {"seed": bytes(range(64, 96)), "actor_type": "ai_gateway", "actor_id": "https://gateway.example.com"},
    "site": {
        "seed": bytes(range(32, 64)),
        "actor_type": "intent_site",
        "actor_id": "https://bellacucina.example/intent",
    },
}

DESCRIPTION = (
    "Test vectors for the IntentWeb 1.0 attribution profile 'ahp-intentweb-ed25519-jcs-v1' of django-agent-handshake "
    "(see 'profile'). query_hash: take protocol_version, flow_type, message and interaction_id from the first "
    "(intent_request) envelope of an interaction, serialise that object as RFC 8785 (JCS) canonical JSON (it must "
    "equal 'canonical_initial' once UTF-8 encoded), and hash it with SHA-256: lowercase hex. Every later message "
    "of the interaction repeats that query_hash. Signatures: for each entry of a message's attribution.chain, build "
    "{actor_id, nonce, query_hash, timestamp} from the entry's actor_id and timestamp and the attribution's nonce "
    "and query_hash, serialise it as JCS (it must equal the entry's 'signed_payload'), and verify the entry's "
    "signature (base64url without padding of the 64-byte Ed25519 signature) with the signer's public key "
    "(base64url without padding of the raw 32-byte key, listed under 'actors'). Ed25519 is deterministic, so "
    "signing 'signed_payload' with the signer's seed gives the same signature. A DID is "
    "'did:agent-semantic-protocol:' followed by the hex SHA-256 of the raw public key. Every case under 'invalid' "
    "must fail verification. Regenerate with: python -m agent_handshake.intentweb.vectors"
)


def _private_key(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(ACTORS[name]["seed"])


def _public_raw(name: str) -> bytes:
    return _private_key(name).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _actor(name: str) -> dict[str, str]:
    actor = ACTORS[name]
    raw = _public_raw(name)
    return {
        "actor_type": actor["actor_type"],
        "actor_id": actor["actor_id"],
        "seed_hex": actor["seed"].hex(),
        "public_key_b64url": b64url(raw),
        "public_key_hex": raw.hex(),
        "did": did_of(raw),
    }


def _message(
    fields: dict[str, Any], *, hashed: str, nonce: str, timestamp: str, signers: list[tuple[str, str]]
) -> dict[str, Any]:
    """An envelope of ``fields`` whose chain is signed by ``signers`` ((actor, entry timestamp) pairs), with the
    payload each signature covers.
    """
    chain, signatures = [], []
    for name, signed_at in signers:
        actor = ACTORS[name]
        entry = sign_entry(
            _private_key(name),
            actor_type=actor["actor_type"],
            actor_id=actor["actor_id"],
            query_hash=hashed,
            nonce=nonce,
            timestamp=signed_at,
        )
        chain.append(entry)
        payload = signed_payload(query_hash=hashed, nonce=nonce, timestamp=signed_at, actor_id=actor["actor_id"])
        signatures.append({"signer": name, "signed_payload": payload.decode("utf-8"), "signature": entry["signature"]})
    envelope = {
        **fields,
        "attribution": {"query_hash": hashed, "nonce": nonce, "timestamp": timestamp, "chain": chain},
        "timestamp": timestamp,
    }
    return {"nonce": nonce, "envelope": envelope, "signatures": signatures}


def _interaction(name: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """``messages``: each one's envelope ``fields``, ``nonce``, ``timestamp`` and ``signers``; the first is the
    ``intent_request`` the interaction's ``query_hash`` is computed from.
    """
    initial = messages[0]["fields"]
    hashed = query_hash(initial)
    return {
        "name": name,
        "canonical_initial": canonical({key: initial[key] for key in INITIAL_FIELDS}).decode("utf-8"),
        "query_hash": hashed,
        "messages": [_message(hashed=hashed, **message) for message in messages],
    }


def build() -> dict[str, Any]:
    booking = _interaction(
        "booking-via-gateway",
        [
            {
                "fields": {
                    "protocol_version": "1.0",
                    "flow_type": "intent_request",
                    "message": "Book a table for 2 at 19:30, café terrace",
                    "interaction_id": "conv-abc123",
                },
                "nonce": "n-7f3a9c2e51d04b8a",
                "timestamp": "2025-10-15T19:23:41Z",
                "signers": [("agent", "2025-10-15T19:23:41Z"), ("gateway", "2025-10-15T19:23:42Z")],
            },
            {
                "fields": {
                    "protocol_version": "1.0",
                    "flow_type": "information_request",
                    "message": "Under which name should I book the table?",
                    "interaction_id": "conv-abc123",
                    "required_information": ["name"],
                },
                "nonce": "s-0c94e1d27a6b3f58",
                "timestamp": "2025-10-15T19:23:43Z",
                "signers": [("site", "2025-10-15T19:23:43Z")],
            },
        ],
    )
    escapes = _interaction(
        "escapes-direct",
        [
            {
                "fields": {
                    "protocol_version": "1.0",
                    "flow_type": "intent_request",
                    "message": 'Any "vegan" options for 4?\nAsk for Zoë \U0001f331, \u00bd price \u0007',
                    "interaction_id": "conv-escapes-7",
                },
                "nonce": "n-3b1d0e6f9a284c75",
                "timestamp": "2025-10-16T08:00:00.250Z",
                "signers": [("agent", "2025-10-16T08:00:00.250Z")],
            }
        ],
    )
    first = booking["messages"][0]
    agent_entry = first["envelope"]["attribution"]["chain"][0]
    agent_key = b64url(_public_raw("agent"))
    invalid = [
        {
            "why": "the nonce differs from the one signed",
            "public_key_b64url": agent_key,
            "query_hash": booking["query_hash"],
            "nonce": first["nonce"][:-1] + "b",
            "entry": agent_entry,
        },
        {
            "why": "the query_hash differs from the one signed (it is the other interaction's)",
            "public_key_b64url": agent_key,
            "query_hash": escapes["query_hash"],
            "nonce": first["nonce"],
            "entry": agent_entry,
        },
        {
            "why": "the entry's timestamp differs from the one signed",
            "public_key_b64url": agent_key,
            "query_hash": booking["query_hash"],
            "nonce": first["nonce"],
            "entry": {**agent_entry, "timestamp": "2025-10-15T19:23:40Z"},
        },
        {
            "why": "the entry's actor_id differs from the one signed",
            "public_key_b64url": agent_key,
            "query_hash": booking["query_hash"],
            "nonce": first["nonce"],
            "entry": {**agent_entry, "actor_id": "personal-assistant-v3"},
        },
        {
            "why": "checked against the gateway's key, not the signer's",
            "public_key_b64url": b64url(_public_raw("gateway")),
            "query_hash": booking["query_hash"],
            "nonce": first["nonce"],
            "entry": agent_entry,
        },
    ]
    return {
        "description": DESCRIPTION,
        "profile": dict(PROFILE),
        "actors": {name: _actor(name) for name in ACTORS},
        "interactions": [booking, escapes],
        "invalid": invalid,
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    PATH.write_text(render(), encoding="utf-8")
    print(f"Wrote {PATH}")
