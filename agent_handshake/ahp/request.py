"""Parsing and validating a ``POST /agent/converse`` body (AHP §6.1, §10).

The schema follows the published request schema, with the project's additions documented in the README:
unknown top-level keys are ignored rather than refused (newer spec fields; a body ``auth`` field is read as a
bearer token), ``context.filters`` narrows retrieval and ``context.input`` carries a MODE3 capability's
structured input, and ``capability`` may be left out (the published schema requires it): the concierge then
routes the query among the capabilities (:mod:`agent_handshake.concierge.routing`), with the agent's
``context.intent_vector`` instead of the query's embedding when it sends one.

Whatever a body holds, it is refused here with a §10 error rather than failing later, by the checks every front
door shares (:mod:`agent_handshake.concierge.validation`: depth, unstorable strings, a ``query`` with nothing to
search for, filter dates that do not exist or that PostgreSQL cannot store, or that no date is between).
"""

from __future__ import annotations

import datetime
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from ..concierge.errors import InvalidInput
from ..concierge.invocation import SchemaValidator
from ..concierge.validation import (
    MAX_PROBLEMS,
    check_query,
    date_range,
    load_object,
    moment,
    schema_error_fields,
)

TYPE = {"type": "string", "pattern": r"^(text|application|media|file|x-[a-z][a-z0-9-]*)/[a-z][a-z0-9_-]*$"}
DATE = {"type": "string", "maxLength": 40}

REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    # The published schema requires "capability" too; without it the query is routed (tests/concierge/test_routing.py).
    "required": ["query"],
    "properties": {
        "ahp": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+$"},
        "capability": {"type": "string", "pattern": r"^[a-z][a-z0-9_]*$", "maxLength": 64},
        "query": {"type": "string", "minLength": 1, "maxLength": 4096},
        "session_id": {"type": ["string", "null"], "maxLength": 128},
        "clarification": {"type": ["string", "null"], "maxLength": 1024},
        # The integrations appendix's body-borne credential (headers take precedence): "Bearer <key>".
        "auth": {"type": "string", "maxLength": 512, "pattern": "^[Bb][Ee][Aa][Rr][Ee][Rr] "},
        "context": {
            "type": "object",
            "properties": {
                "requesting_agent": {"type": "string", "maxLength": 128},
                "user_intent": {"type": "string", "maxLength": 256},
                "max_tokens": {"type": "integer", "minimum": 1, "maximum": 32768},
                "accept_types": {"type": "array", "items": TYPE, "maxItems": 20},
                "callback_url": {"type": "string", "maxLength": 2048},
                "locale": {"type": "string", "maxLength": 35},
                # Agent Semantic Protocol §4: the goal's embedding, used for routing when it has the dimensions
                # of the site's embedding model (checked, with finiteness, by the concierge).
                "intent_vector": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 8192},
                # MODE3: structured input, validated against the capability's input_schema.
                "input": {"type": "object"},
                "filters": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "content_types": {"type": "array", "items": TYPE, "maxItems": 20},
                        "sections": {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 20},
                        "published_after": DATE,
                        "published_before": DATE,
                    },
                },
            },
        },
    },
}
_validator = SchemaValidator(REQUEST_SCHEMA)


class RequestError(Exception):
    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


@dataclass
class ConverseRequest:
    #: None: the agent left the choice to the site (routing).
    capability: str | None
    query: str
    session_id: str | None = None
    clarification: str | None = None
    requesting_agent: str = ""
    max_tokens: int | None = None
    accept_types: list[str] | None = None
    content_types: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    published_after: datetime.datetime | None = None
    published_before: datetime.datetime | None = None
    #: MODE3 structured input (``context.input``), None when the request has none.
    input: dict[str, Any] | None = None
    callback_url: str = ""
    #: ``context.intent_vector`` as sent (numbers; its dimensions are checked when it is used).
    intent_vector: list[float] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def parse_request(body: bytes) -> ConverseRequest:
    """The validated request, or :class:`RequestError` with the AHP code and the failing fields."""
    try:
        return parse_data(load_object(body))
    except InvalidInput as exc:
        raise RequestError(exc.code, exc.message, **exc.details) from exc


def parse_data(data: dict[str, Any]) -> ConverseRequest:
    """:func:`parse_request` of a body already read as a checked JSON object."""
    missing = [name for name in ("query",) if name not in data or data[name] in (None, "")]
    if missing:
        raise RequestError("missing_field", f"Required field(s) missing: {', '.join(missing)}.", fields=missing)
    # The first MAX_PROBLEMS errors: each item of a long array can fail, and neither the refusal nor the work of
    # finding its errors should grow with the array.
    found = itertools.islice(_validator.iter_errors(data), MAX_PROBLEMS)
    errors = sorted(found, key=lambda error: list(error.absolute_path))
    if errors:
        problems = [problem for error in errors for problem in schema_error_fields(error)][:MAX_PROBLEMS]
        # An element of the intent vector is named by the vector (its index is in the message).
        fields = sorted({re.sub(r"^(context\.intent_vector)\..*", r"\1", path) for path, _ in problems})
        detail = "; ".join(f"{path}: {message}" for path, message in problems[:5])
        raise RequestError("invalid_request", f"Invalid field(s): {detail}", fields=fields)
    check_query(data["query"])
    context = data.get("context") or {}
    filters = context.get("filters") or {}
    after = moment(filters.get("published_after"), "context.filters.published_after")
    before = moment(filters.get("published_before"), "context.filters.published_before")
    date_range(after, before, ["context.filters.published_after", "context.filters.published_before"])
    return ConverseRequest(
        capability=data.get("capability") or None,
        query=data["query"],
        session_id=data.get("session_id"),
        clarification=data.get("clarification"),
        requesting_agent=context.get("requesting_agent", ""),
        max_tokens=context.get("max_tokens"),
        accept_types=context.get("accept_types") or None,
        content_types=filters.get("content_types", []),
        sections=filters.get("sections", []),
        published_after=after,
        published_before=before,
        input=context.get("input"),
        callback_url=context.get("callback_url", ""),
        intent_vector=context.get("intent_vector"),
        raw=data,
    )
