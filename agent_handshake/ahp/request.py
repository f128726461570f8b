"""Parsing and validating a ``POST /agent/converse`` body (AHP §6.1, §10).

The schema follows the published request schema, with the project's additions documented in the README:
unknown top-level keys are ignored rather than refused (newer spec fields; a body ``auth`` field is read as a
bearer token), ``context.filters`` narrows retrieval and ``context.input`` carries a MODE3 capability's
structured input.

Whatever a body holds, it is refused here with a §10 error rather than failing later: JSON nested more than
:data:`MAX_DEPTH` levels, a string anywhere (keys included) that no text column or UTF-8 encoder accepts (NUL,
an unpaired surrogate from a ``\\ud800`` escape), a ``query`` with nothing to search for (no letter or digit),
and filter dates that do not exist or that PostgreSQL cannot store.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import make_aware

TYPE = {"type": "string", "pattern": r"^(text|application|media|file|x-[a-z][a-z0-9-]*)/[a-z][a-z0-9_-]*$"}
DATE = {"type": "string", "maxLength": 40}

REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["capability", "query"],
    "properties": {
        "ahp": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+$"},
        "capability": {"type": "string", "pattern": r"^[a-z][a-z0-9_]*$", "maxLength": 64},
        "query": {"type": "string", "minLength": 1, "maxLength": 4096},
        "session_id": {"type": ["string", "null"], "maxLength": 128},
        "clarification": {"type": ["string", "null"], "maxLength": 1024},
        "context": {
            "type": "object",
            "properties": {
                "requesting_agent": {"type": "string", "maxLength": 128},
                "user_intent": {"type": "string", "maxLength": 256},
                "max_tokens": {"type": "integer", "minimum": 1, "maximum": 32768},
                "accept_types": {"type": "array", "items": TYPE, "maxItems": 20},
                "callback_url": {"type": "string", "maxLength": 2048},
                "locale": {"type": "string", "maxLength": 35},
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
_validator = jsonschema.Draft7Validator(REQUEST_SCHEMA)

#: Deeper JSON is refused before anything recurses into it (the schema validator, json.dumps, the database
#: driver); no AHP body needs more than a handful of levels.
MAX_DEPTH = 32
#: NUL (PostgreSQL text cannot hold it) and the surrogate code points (UTF-8 cannot encode them unpaired; JSON's
#: ``\\ud800`` escape makes one).
UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
UNSTORABLE_MESSAGE = "contains a NUL character or an unpaired surrogate (\\ud800-\\udfff), which no text can hold."
#: UTC offsets in use run from -12:00 to +14:00; PostgreSQL refuses some that Python accepts.
MAX_UTC_OFFSET = datetime.timedelta(hours=14)


class RequestError(Exception):
    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


@dataclass
class ConverseRequest:
    capability: str
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
    raw: dict[str, Any] = field(default_factory=dict)


def _dotted(path: Any) -> str:
    return ".".join(str(part) for part in path) or "(body)"


def _path(error: jsonschema.ValidationError) -> str:
    return _dotted(error.absolute_path)


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character no text column can store (see :data:`UNSTORABLE`)."""
    return UNSTORABLE.search(text) is not None


def _check_values(data: Any) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` and unstorable strings, keys included, naming the field.

    Iterative, so the walk itself cannot exhaust the stack."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise RequestError("invalid_request", f"The body is nested too deeply (more than {MAX_DEPTH} levels).")
        if isinstance(value, str):
            if unstorable(value):
                name = _dotted(path)
                raise RequestError("invalid_request", f"{name} {UNSTORABLE_MESSAGE}", fields=[name])
        elif isinstance(value, dict):
            for key, item in value.items():
                if unstorable(key):
                    name = _dotted(path)
                    raise RequestError("invalid_request", f"A key in {name} {UNSTORABLE_MESSAGE}", fields=[name])
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))


def _check_query(query: str) -> None:
    # Whitespace, zero-width and other format characters, punctuation: nothing to search for or act on.
    if not any(char.isalnum() for char in query):
        raise RequestError("invalid_request", "query must contain at least one letter or digit.", fields=["query"])


def _moment(value: str | None, name: str) -> datetime.datetime | None:
    """The filter date in UTC; a day alone is its midnight UTC."""
    if value is None:
        return None
    field_name = f"context.filters.{name}"
    refused = RequestError(
        "invalid_request",
        f"{field_name} must be an existing ISO 8601 date or datetime in ASCII digits, with a UTC offset of at most "
        "14 hours (e.g. 2025-01-31 or 2025-01-31T09:00:00+01:00).",
        fields=[field_name],
    )
    if not value.isascii():  # the parsers' \d also matches other scripts' digits
        raise refused
    try:
        moment = parse_datetime(value)
        if moment is None and (day := parse_date(value)) is not None:
            moment = datetime.datetime.combine(day, datetime.time.min)
    except ValueError:  # well formed, but no such day or time (2025-02-30, T25:00, year 0)
        raise refused from None
    if moment is None:
        raise refused
    if moment.tzinfo is None:
        moment = make_aware(moment, datetime.timezone.utc)
    offset = moment.utcoffset()
    if offset is None or abs(offset) > MAX_UTC_OFFSET:
        raise refused
    try:
        return moment.astimezone(datetime.timezone.utc)
    except OverflowError:  # before year 1 or after 9999 once in UTC
        raise refused from None


def parse_request(body: bytes) -> ConverseRequest:
    """The validated request, or :class:`RequestError` with the AHP code and the failing fields."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError("invalid_request", f"The body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise RequestError(
            "invalid_request", f"The body is nested too deeply (more than {MAX_DEPTH} levels)."
        ) from None
    if not isinstance(data, dict):
        raise RequestError("invalid_request", "The body must be a JSON object.")
    _check_values(data)
    missing = [name for name in ("capability", "query") if name not in data or data[name] in (None, "")]
    if missing:
        raise RequestError("missing_field", f"Required field(s) missing: {', '.join(missing)}.", fields=missing)
    errors = sorted(_validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    if errors:
        fields = sorted({_path(error) for error in errors})
        detail = "; ".join(f"{_path(error)}: {error.message}" for error in errors[:5])
        raise RequestError("invalid_request", f"Invalid field(s): {detail}", fields=fields)
    _check_query(data["query"])
    context = data.get("context") or {}
    filters = context.get("filters") or {}
    return ConverseRequest(
        capability=data["capability"],
        query=data["query"],
        session_id=data.get("session_id"),
        clarification=data.get("clarification"),
        requesting_agent=context.get("requesting_agent", ""),
        max_tokens=context.get("max_tokens"),
        accept_types=context.get("accept_types") or None,
        content_types=filters.get("content_types", []),
        sections=filters.get("sections", []),
        published_after=_moment(filters.get("published_after"), "published_after"),
        published_before=_moment(filters.get("published_before"), "published_before"),
        input=context.get("input"),
        callback_url=context.get("callback_url", ""),
        raw=data,
    )
