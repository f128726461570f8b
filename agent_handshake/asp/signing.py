"""Per-message signatures (Agent Semantic Protocol §12: "Ed25519 over the entire Protobuf payload"), in the
``signature`` fields upstream's Go code sends: IntentMessage field 9, NegotiationResponse field 10.

What a signature covers, ours::

    b"agent-handshake/asp-intent/v1" 0x00       + the IntentMessage without its signature field
    b"agent-handshake/asp-negotiation/v1" 0x00  + the NegotiationResponse without its signature field

each message serialized *deterministically*: proto3's canonical encoding, fields in field-number order, packed
repeated floats, map entries sorted by key (``SerializeToString(deterministic=True)`` in Python,
``proto.MarshalOptions{Deterministic: true}`` in Go), unknown fields kept after the known ones. The receiver parses
the message, clears ``signature`` and serializes it again the same way, so every field, ``timestamp``,
``intent_vector`` and ``metadata`` included, is covered, not only the text.

Why a domain prefix: protobuf bytes carry no type, so the same bytes can be a valid IntentMessage and a valid
NegotiationResponse (field 1 is a string in both), and the agent's key also signs handshake challenges. The prefix
names what is signed and its version, so a signature made for one message type, or for a handshake, never verifies
as another.

Upstream's code signs less: ``id + payload`` (an intent) and ``request_id + reason`` (a response), the UTF-8
strings concatenated with no separator, so ``("ab", "c")`` and ``("a", "bc")`` sign alike and a message's vector,
capabilities, DID and timestamp can be changed under a valid signature. :func:`upstream_intent_bytes` and
:func:`upstream_negotiation_bytes` build those bytes for the interoperability vectors (``vectors.json``); this site
never accepts them.
"""

from __future__ import annotations

from google.protobuf.message import Message

from ..identity.did import verify
from ..identity.site_key import sign
from . import asp_pb2

INTENT_DOMAIN = b"agent-handshake/asp-intent/v1\x00"
NEGOTIATION_DOMAIN = b"agent-handshake/asp-negotiation/v1\x00"
SIGNATURE_BYTES = 64

DOMAINS: dict[type[Message], bytes] = {
    asp_pb2.IntentMessage: INTENT_DOMAIN,
    asp_pb2.NegotiationResponse: NEGOTIATION_DOMAIN,
}


def signed_bytes(message: Message) -> bytes:
    """What ``message``'s signature covers (see the module docstring)."""
    unsigned = type(message)()
    unsigned.CopyFrom(message)
    unsigned.ClearField("signature")
    return DOMAINS[type(message)] + unsigned.SerializeToString(deterministic=True)


def verify_message(message: Message, public_key: bytes | str) -> bool:
    """Whether ``message.signature`` is ``public_key``'s signature of :func:`signed_bytes`."""
    return len(message.signature) == SIGNATURE_BYTES and verify(public_key, message.signature, signed_bytes(message))


def sign_as_site(message: Message) -> Message:
    """Set ``message.signature`` to the site key's signature of :func:`signed_bytes` (and return it)."""
    message.signature = sign(signed_bytes(message))
    return message


def upstream_intent_bytes(intent: asp_pb2.IntentMessage) -> bytes:
    """What upstream's Go code signs for an intent: ``id + payload``. Not what this site verifies."""
    return (intent.id + intent.payload).encode("utf-8")


def upstream_negotiation_bytes(response: asp_pb2.NegotiationResponse) -> bytes:
    """What upstream's Go code signs for a response: ``request_id + reason``. Not what this site signs."""
    return (response.request_id + response.reason).encode("utf-8")
