"""Agent Semantic Protocol §4 framing: one protobuf message behind a 4-byte length and a type byte.

::

    Length (uint32, big-endian) = 1 + len(payload) | Type (1 byte) | protobuf payload

The types are those of §4 (:class:`MessageType`). At ``POST /agent/asp`` a request body, and a response body, is
exactly one frame: :func:`decode` refuses anything else with a :class:`FrameError` whose ``code`` says which rule
the body broke (a body too short to hold a header, a length that disagrees with the body, an unknown type, a
payload that is not that type's protobuf message).
"""

from __future__ import annotations

import enum
import struct

from google.protobuf.message import DecodeError, Message

from . import asp_pb2

HEADER = struct.Struct(">IB")  # the length, then the type byte


class MessageType(enum.IntEnum):
    HANDSHAKE = 0x01
    INTENT = 0x02
    NEGOTIATION = 0x03
    WORKFLOW = 0x04
    CAPABILITY = 0x05


#: The protobuf message each type carries.
MESSAGES: dict[MessageType, type[Message]] = {
    MessageType.HANDSHAKE: asp_pb2.HandshakeMessage,
    MessageType.INTENT: asp_pb2.IntentMessage,
    MessageType.NEGOTIATION: asp_pb2.NegotiationResponse,
    MessageType.WORKFLOW: asp_pb2.WorkflowMessage,
    MessageType.CAPABILITY: asp_pb2.CapabilityAnnouncement,
}


class FrameError(ValueError):
    """A body that is not one well-formed frame; ``code`` names the rule it broke."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def type_of(message: Message) -> MessageType:
    for kind, cls in MESSAGES.items():
        if isinstance(message, cls):
            return kind
    raise TypeError(f"{type(message).__name__} is not an Agent Semantic Protocol message")


def encode(message: Message) -> bytes:
    """``message`` as one frame (its type from its class; the payload serialized deterministically)."""
    payload = message.SerializeToString(deterministic=True)
    return HEADER.pack(1 + len(payload), type_of(message)) + payload


def decode(body: bytes) -> tuple[MessageType, Message]:
    """The type and message of a body that is exactly one frame, or :class:`FrameError`."""
    if len(body) < HEADER.size:
        raise FrameError(
            "frame_too_short",
            f"The body is {len(body)} bytes; a frame is at least {HEADER.size}: a 4-byte big-endian length, a type "
            "byte, then the protobuf payload.",
        )
    length, kind = HEADER.unpack_from(body)
    if length != len(body) - 4:
        raise FrameError(
            "frame_length_mismatch",
            f"The frame's length field says {length} bytes (type byte and payload) but {len(body) - 4} follow it: "
            "a body is exactly one frame.",
        )
    if kind not in MessageType._value2member_map_:
        known = ", ".join(f"0x{t:02x} {t.name.lower()}" for t in MessageType)
        raise FrameError("unknown_message_type", f"Unknown message type 0x{kind:02x}; the types are {known}.")
    message_type = MessageType(kind)
    cls = MESSAGES[message_type]
    try:
        message = cls.FromString(body[HEADER.size :])
    except DecodeError:
        raise FrameError(
            "invalid_payload", f"The payload is not a protobuf {cls.DESCRIPTOR.full_name} (type 0x{kind:02x})."
        ) from None
    return message_type, message
