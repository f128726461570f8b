"""The IntentWeb §3 envelope as ``POST /intent`` takes it: validated, with our caps, into an :class:`Envelope`.

The schema is the spec's (every field the upstream envelope schema names, the same required ones), with bounds
of our own (lengths, chain size) and two extensions a client may send: ``collected_information`` (structured
answers, by the capability's input field names: what the intent page's forms send) and ``callback_url`` (where
an ``async`` capability's result is posted). Unknown fields are ignored, as §10 asks of minor versions.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ..concierge import errors
from ..concierge.invocation import SchemaValidator

PROTOCOL_VERSION = "1.0"
#: The versions we read (§10: a new minor version is backward-compatible with ours, a new major one is not).
SPOKEN = r"^1\.[0-9]{1,3}$"
#: What a version looks like: one that does, but is not :data:`SPOKEN`, is another version (not a malformed one).
VERSION_LIKE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6}){0,3}")
FLOW_TYPES = (
    "intent_request",
    "information_request",
    "information_response",
    "clarification_request",
    "execution_result",
    "error",
)
TIMESTAMP = {"type": "string", "minLength": 10, "maxLength": 40}
CHAIN_ENTRY = {
    "type": "object",
    "required": ["actor_type", "actor_id", "timestamp", "signature"],
    "properties": {
        "actor_type": {"type": "string", "maxLength": 64},
        "actor_id": {"type": "string", "minLength": 1, "maxLength": 500},
        "timestamp": TIMESTAMP,
        "signature": {"type": "string", "maxLength": 200},
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["protocol_version", "flow_type", "message", "interaction_id", "attribution"],
    "properties": {
        "protocol_version": {"type": "string", "pattern": SPOKEN},
        "flow_type": {"enum": list(FLOW_TYPES)},
        "message": {"type": "string", "maxLength": 4096},
        "interaction_id": {"type": "string", "maxLength": 128, "pattern": r"^[\x21-\x7e]{1,128}$"},
        "attribution": {
            "type": "object",
            "required": ["query_hash", "nonce", "timestamp", "chain"],
            "properties": {
                "query_hash": {"type": "string", "pattern": r"^[0-9a-f]{64}$"},
                "nonce": {"type": "string", "maxLength": 128, "pattern": r"^[\x21-\x7e]{8,128}$"},
                "timestamp": TIMESTAMP,
                "chain": {"type": "array", "maxItems": 8, "items": CHAIN_ENTRY},
            },
        },
        "explicability": {"type": "array", "maxItems": 8, "items": {"type": "object"}},
        "locale": {"type": "string", "maxLength": 35},
        "timestamp": TIMESTAMP,
        "collected_information": {"type": "object", "maxProperties": 50},
        "callback_url": {"type": "string", "maxLength": 2048},
    },
}


_validator = SchemaValidator(SCHEMA)


@dataclass
class Envelope:
    body: dict[str, Any]
    #: The message's version, which the answer repeats (§3.3: "Same as request").
    protocol_version: str
    flow_type: str
    message: str
    interaction_id: str
    attribution: dict[str, Any]
    sent_at: datetime.datetime
    collected: dict[str, Any] = field(default_factory=dict)
    callback_url: str = ""

    @property
    def chain(self) -> list[dict[str, Any]]:
        return self.attribution["chain"]


def parse_time(value: str, name: str) -> datetime.datetime:
    """An ISO 8601 date-time with a UTC offset ("Z" or "+02:00"), or :class:`InvalidInput` naming ``name``."""
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise errors.InvalidInput(f"{name} is not an ISO 8601 date-time.", fields=[name]) from None
    if moment.tzinfo is None:
        raise errors.InvalidInput(f'{name} needs a UTC offset ("Z" or "+02:00").', fields=[name])
    return moment


def complaint(problem: jsonschema.ValidationError) -> str:
    """What is wrong, by the field's name: JSON Schema's messages begin with the value they refuse, which is the
    client's text (its intent, markup, control characters), not to be sent back in a message."""
    if problem.validator == "required":
        return problem.message  # the schema's name for what is missing: "'nonce' is a required property"
    where = ".".join(str(part) for part in problem.absolute_path) or "the envelope"
    quoted = repr(problem.instance)
    if problem.message.startswith(quoted):
        return where + problem.message[len(quoted) :]  # "flow_type is not one of [...]"
    return f"{where} does not satisfy {problem.validator!r} of the envelope's schema"


def spoken(version: Any) -> str | None:
    """``version`` if it is one we speak (a 1.x: §10 keeps minor versions compatible), else None."""
    return version if isinstance(version, str) and re.fullmatch(SPOKEN, version) else None


def parse(data: Any) -> Envelope:
    if not isinstance(data, dict):
        raise errors.InvalidInput("The body must be a JSON object: the IntentWeb envelope (§3.2).")
    version = data.get("protocol_version")
    if isinstance(version, str) and VERSION_LIKE.fullmatch(version) and spoken(version) is None:
        # Said first and as what it is (not the schema's pattern): a message of another major version need not have
        # our envelope's shape.
        raise errors.InvalidInput(
            f"This site speaks IntentWeb {PROTOCOL_VERSION} (and reads any 1.x as it); protocol_version "
            f"{version} is not one of those.",  # digits and dots (VERSION_LIKE), at most 27
            fields=["protocol_version"],
        )
    problems = sorted(_validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    if problems:
        fields = sorted({".".join(str(part) for part in problem.absolute_path) or "(envelope)" for problem in problems})
        for problem in problems:
            if problem.validator == "required":
                prefix = ".".join(str(part) for part in problem.absolute_path)
                fields = [f"{prefix}.{name}" if prefix else name for name in problem.validator_value
                          if name not in problem.instance] or fields  # fmt: skip
                break
        raise errors.InvalidInput(f"Invalid IntentWeb envelope: {complaint(problems[0])[:200]}", fields=fields)
    attribution = data["attribution"]
    sent_at = parse_time(attribution["timestamp"], "attribution.timestamp")
    for index, entry in enumerate(attribution["chain"]):
        parse_time(entry["timestamp"], f"attribution.chain.{index}.timestamp")
    if "timestamp" in data:  # optional, but a date-time when given (the upstream schema's format), as those are
        parse_time(data["timestamp"], "timestamp")
    return Envelope(
        body=data,
        protocol_version=data["protocol_version"],
        flow_type=data["flow_type"],
        message=data["message"],
        interaction_id=data["interaction_id"],
        attribution=attribution,
        sent_at=sent_at,
        collected=dict(data.get("collected_information") or {}),
        callback_url=data.get("callback_url") or "",
    )
