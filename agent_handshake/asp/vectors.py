"""Interoperability test vectors for this site's Agent Semantic Protocol binding (``POST /agent/asp``).

Another implementation checks itself against ``vectors.json`` (beside this module) without running ours: fixed
Ed25519 seeds, their public keys and DIDs, a handshake (both challenges, the bytes each role signs, the signatures,
the three frames), a signed IntentMessage and NegotiationResponse (serialized bytes, frames, signed bytes,
signatures), what upstream's Go code signs for the same two messages (``id + payload``, ``request_id + reason``:
marked ``upstream``, never accepted here), and signatures that must fail. Every value follows from the fixed inputs
and Ed25519 is deterministic (RFC 8032), so :func:`build` gives the same bytes on every run;
``python -m agent_handshake.asp.vectors`` rewrites the file, and a test fails when the file and :func:`build`
disagree (and re-derives every value without our helpers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..identity.did import challenge_payload
from ..identity.site_key import did_of
from . import asp_pb2, signing
from .framing import encode

PATH = Path(__file__).with_name("vectors.json")

SEEDS = {"agent": bytes(range(32)), "site": bytes(range(32, 64))}
AGENT_CHALLENGE = bytes(range(0xA0, 0xC0))
SITE_CHALLENGE = bytes(range(0xC0, 0xE0))
HELLO_AT, ANSWER_AT, VERIFY_AT = 1_760_556_221_000_000_000, 1_760_556_221_250_000_000, 1_760_556_221_500_000_000
INTENT_AT, RESPONSE_AT = 1_760_556_230_000_000_000, 1_760_556_230_750_000_000
ACCESS_TOKEN = "asp_vector-token-not-a-real-credential"

DESCRIPTION = (
    "Test vectors for the Agent Semantic Protocol v0.1 binding of django-agent-handshake (POST /agent/asp). "
    "Frames: a 4-byte big-endian length (1 + payload length), a type byte (0x01 handshake, 0x02 intent, 0x03 "
    "negotiation, 0x04 workflow, 0x05 capability), then the protobuf payload (proto/asp.proto, package symplex.v1, "
    "with IntentMessage.signature = 9, NegotiationResponse.signature = 10, HandshakeMessage.access_token = 100, "
    "expires_in = 101); payloads are serialized deterministically (field-number order, packed floats, map entries "
    "sorted by key). Keys: Ed25519 from the 32-byte seeds; a DID is 'did:agent-semantic-protocol:' + hex SHA-256 of "
    "the raw public key. Handshake: each side signs 'agent-handshake/asp-handshake/v1' 0x00 role 0x00 signer DID "
    "0x00 peer DID 0x00 challenge, the site as 'responder' over the agent's challenge, the agent as 'initiator' over "
    "the site's. Messages: a signature (field 9 of an intent, 10 of a response) covers the domain "
    "('agent-handshake/asp-intent/v1' 0x00 or 'agent-handshake/asp-negotiation/v1' 0x00) followed by the message "
    "serialized without its signature field ('signed_bytes_hex'). 'upstream' holds what upstream's Go code signs "
    "for the same messages (id + payload, request_id + reason, UTF-8, no separator) with the same keys: for "
    "comparison only; this site never accepts those signatures. Every case under 'invalid' must fail verification. "
    "Regenerate with: python -m agent_handshake.asp.vectors"
)


def _key(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(SEEDS[name])


def _public(name: str) -> bytes:
    return _key(name).public_key().public_bytes_raw()


def _did(name: str) -> str:
    return did_of(_public(name))


def _sign(name: str, message: Any) -> Any:
    message.signature = _key(name).sign(signing.signed_bytes(message))
    return message


def _message(message: Any) -> dict[str, Any]:
    """A signed message's bytes: serialized, framed, what is signed, the signature."""
    return {
        "payload_hex": message.SerializeToString(deterministic=True).hex(),
        "frame_hex": encode(message).hex(),
        "signed_bytes_hex": signing.signed_bytes(message).hex(),
        "signature_hex": message.signature.hex(),
    }


def intent() -> asp_pb2.IntentMessage:
    return _sign(
        "agent",
        asp_pb2.IntentMessage(
            id="intent-7f3a9c2e",
            intent_vector=[0.25, -0.5, 0.125, 1.0],
            capabilities=["content_search"],
            did=_did("agent"),
            payload="How hot should the water be for gyokuro? Zoë asks ½ 🌱",
            timestamp=INTENT_AT,
            trust_score=0.5,
            metadata={"locale": "en", "client": "vector-agent"},
        ),
    )


def negotiation() -> asp_pb2.NegotiationResponse:
    return _sign(
        "site",
        asp_pb2.NegotiationResponse(
            request_id="intent-7f3a9c2e",
            agent_id="https://teahouse.example/",
            accepted=True,
            workflow_steps=["content_search"],
            did=_did("site"),
            timestamp=RESPONSE_AT,
            reason="Brew gyokuro at 50-60 °C for about two minutes.",
            trust_delta=0.05,
        ),
    )


def handshake() -> dict[str, Any]:
    agent, site = _did("agent"), _did("site")
    responder = challenge_payload("responder", site, agent, AGENT_CHALLENGE)
    initiator = challenge_payload("initiator", agent, site, SITE_CHALLENGE)
    responder_signature, initiator_signature = _key("site").sign(responder), _key("agent").sign(initiator)
    hello = asp_pb2.HandshakeMessage(
        agent_id="vector-agent", did=agent, capabilities=["shopping"], version="1.0.0", timestamp=HELLO_AT,
        public_key=_public("agent"), challenge=AGENT_CHALLENGE,
    )  # fmt: skip
    answer = asp_pb2.HandshakeMessage(
        agent_id="https://teahouse.example/", did=site, capabilities=["content_search", "site_info"], version="1.0.0",
        timestamp=ANSWER_AT, public_key=_public("site"), challenge=SITE_CHALLENGE,
        challenge_response=responder_signature,
    )  # fmt: skip
    verify = asp_pb2.HandshakeMessage(did=agent, challenge=SITE_CHALLENGE, challenge_response=initiator_signature)
    credential = asp_pb2.HandshakeMessage(
        agent_id="https://teahouse.example/", did=site, version="1.0.0", timestamp=VERIFY_AT,
        public_key=_public("site"), access_token=ACCESS_TOKEN, expires_in=3600,
    )  # fmt: skip
    return {
        "agent_challenge_hex": AGENT_CHALLENGE.hex(),
        "site_challenge_hex": SITE_CHALLENGE.hex(),
        "responder_signed_bytes_hex": responder.hex(),
        "responder_signature_hex": responder_signature.hex(),
        "initiator_signed_bytes_hex": initiator.hex(),
        "initiator_signature_hex": initiator_signature.hex(),
        "frames": {
            "agent_hello_hex": encode(hello).hex(),
            "site_answer_hex": encode(answer).hex(),
            "agent_verify_hex": encode(verify).hex(),
            "site_credential_hex": encode(credential).hex(),
        },
    }


def upstream(signer: str, signed: bytes) -> dict[str, Any]:
    return {
        "what": "upstream's signed bytes (Go code), not what this site verifies or signs",
        "signer": signer,
        "signed_bytes_hex": signed.hex(),
        "signature_hex": _key(signer).sign(signed).hex(),
    }


def build() -> dict[str, Any]:
    signed_intent, signed_response = intent(), negotiation()
    tampered = asp_pb2.IntentMessage()
    tampered.CopyFrom(signed_intent)
    tampered.payload = "How hot should the water be for sencha? Zoë asks ½ 🌱"
    upstream_signed = asp_pb2.IntentMessage()
    upstream_signed.CopyFrom(signed_intent)
    upstream_signed.signature = _key("agent").sign(signing.upstream_intent_bytes(signed_intent))
    as_response = signing.NEGOTIATION_DOMAIN + signing.signed_bytes(signed_intent)[len(signing.INTENT_DOMAIN) :]
    return {
        "description": DESCRIPTION,
        "keys": {
            name: {"seed_hex": seed.hex(), "public_key_hex": _public(name).hex(), "did": _did(name)}
            for name, seed in SEEDS.items()
        },
        "handshake": handshake(),
        "intent": {"signer": "agent", **_message(signed_intent)},
        "negotiation": {"signer": "site", **_message(signed_response)},
        "upstream": {
            "intent": upstream("agent", signing.upstream_intent_bytes(signed_intent)),
            "negotiation": upstream("site", signing.upstream_negotiation_bytes(signed_response)),
        },
        "invalid": [
            {
                "why": "the payload was changed after signing (the signature is the original's)",
                "signer": "agent",
                "frame_hex": encode(tampered).hex(),
            },
            {
                "why": "field 9 holds upstream's signature (of id + payload), not one of our signed bytes",
                "signer": "agent",
                "frame_hex": encode(upstream_signed).hex(),
            },
            {
                "why": "the intent's signature checked as a NegotiationResponse's (the domain differs)",
                "signer": "agent",
                "signed_bytes_hex": as_response.hex(),
                "signature_hex": signed_intent.signature.hex(),
            },
        ],
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    PATH.write_text(render(), encoding="utf-8")
    print(f"Wrote {PATH}")
