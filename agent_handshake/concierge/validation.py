"""What every front door checks of the JSON an agent sent, before anything else reads it.

Only JSON is read: ``NaN``, ``Infinity`` and numbers beyond a float's range (``1e400``), which Python's parser accepts
and RFC 8259 does not, are refused as the body's syntax error (a schema's ``number`` takes them, PostgreSQL does
not). JSON nested more than :data:`MAX_DEPTH` levels is refused before anything recurses into it (a schema validator,
``json.dumps``, the database driver); so is a string anywhere, keys included, that no text column or UTF-8
encoder accepts (NUL, an unpaired surrogate from a ``\\ud800`` escape), a question with nothing to search for,
and a date that does not exist or that PostgreSQL cannot store. Each refusal is an
:class:`~.errors.InvalidInput` naming the field, so each front door reports it in its own shape.

A value that fails a JSON Schema is described, never quoted whole (:func:`schema_message`): jsonschema's own
messages begin with the value they refuse, and a caller's value is as large as ``MAX_REQUEST_BYTES`` allows.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any

import jsonschema
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import make_aware

from .errors import InvalidInput

#: No request body needs more than a handful of levels.
MAX_DEPTH = 32
#: NUL (PostgreSQL text cannot hold it) and the surrogate code points (UTF-8 cannot encode them unpaired; JSON's
#: ``\\ud800`` escape makes one).
UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
UNSTORABLE_MESSAGE = "contains a NUL character or an unpaired surrogate (\\ud800-\\udfff), which no text can hold."
#: UTC offsets in use run from -12:00 to +14:00; PostgreSQL refuses some that Python accepts.
MAX_UTC_OFFSET = datetime.timedelta(hours=14)
#: The most of a name the client chose (a key, a capability in a path, a method) that an error quotes: a capability
#: name's maxLength in the AHP request schema.
NAME_LENGTH = 64
#: The most of a value the client sent (a string, a number) that an error quotes.
VALUE_LENGTH = 40
#: The most values of a schema's ``enum`` an error lists; the rest are counted.
CHOICES_SHOWN = 10
#: The most digits an integer in a body may have: Python's default limit on converting one
#: (``sys.int_info.default_max_str_digits``), stated here so that the refusal is the site's, in its words.
MAX_DIGITS = 4300
#: The most fields one refusal of a schema names: each item of a long array can fail, and the refusal should not
#: grow with the array.
MAX_PROBLEMS = 10


def dotted(path: Any, whole: str = "(body)") -> str:
    """A path into the JSON as one name (``whole`` for the validated value itself), each key cut (:func:`named`):
    the keys are the client's."""
    return ".".join(named(str(part)) for part in path) or whole


def named(name: str) -> str:
    """A name the client chose, as an error quotes it: at most :data:`NAME_LENGTH` characters, the last an ellipsis
    when it was cut, so that an error never grows with what was sent."""
    return name if len(name) <= NAME_LENGTH else name[: NAME_LENGTH - 1] + "…"


def schema_error_fields(error: jsonschema.ValidationError, whole: str = "(body)") -> list[tuple[str, str]]:
    """The fields a schema error is about, each dotted (:func:`dotted`) with what is wrong with it
    (:func:`schema_message`).

    An ``additionalProperties: false`` error's path is the object that holds the keys the schema does not allow,
    and its message quotes them whole: each key is named instead (at most :data:`MAX_PROBLEMS`), cut
    (:func:`named`), as the field to remove."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = schema.get("properties") or {}
        patterns = schema.get("patternProperties") or {}
        unexpected = [
            (dotted([*error.absolute_path, key]), "no such property is allowed")
            for key in error.instance
            if key not in known and not any(re.search(pattern, key) for pattern in patterns)
        ]
        if unexpected:
            return unexpected[:MAX_PROBLEMS]
    return [(dotted(error.absolute_path, whole), schema_message(error))]


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, the last an ellipsis when it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Each JSON type as a sentence names it.
TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def kind(value: Any) -> str:
    """The JSON type of ``value``, as a sentence names it ("an object")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"an object of {len(value)} propert{'ies' if len(value) != 1 else 'y'}"
    return type(value).__name__


def shown(value: Any) -> str:
    """A value the client sent, as an error may quote it: a string quoted and escaped (``repr``, so control and
    invisible characters show as escapes), a number, ``true``/``false``/``null``, each in at most about
    :data:`VALUE_LENGTH` characters; an array or object by its type and size alone."""
    if isinstance(value, str):
        return repr(cut(value, VALUE_LENGTH))
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        try:
            return cut(str(value), VALUE_LENGTH)
        except ValueError:  # an integer past Python's limit on digits to print
            return "a very long number"
    return kind(value)


def listed(value: Any) -> str:
    """A value the schema itself holds (an ``enum``'s, a ``const``), as an error lists it: a string as it is, any
    other value as JSON; cut to :data:`VALUE_LENGTH` characters either way."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return cut(text, VALUE_LENGTH)


def _count(number: Any, noun: str, plural: str | None = None) -> str:
    return f"{listed(number)} {noun if number == 1 else plural or noun + 's'}"


def schema_message(error: jsonschema.ValidationError) -> str:
    """What ``error`` says is wrong, from its keyword, the schema's own value for it and at most a short rendering
    of what was sent (:func:`shown`): never jsonschema's message, which begins with the whole value refused. The
    sentence has no subject: a field's path goes before it ("code: must be at most 10 characters (got 50000)")."""
    keyword, expected, instance = error.validator, error.validator_value, error.instance
    if "propertyNames" in error.relative_schema_path:  # the instance is a key, the path its object's
        return "has a property name that does not satisfy its schema's propertyNames"
    if keyword == "type":
        types = expected if isinstance(expected, list) else [expected]
        return f"must be {' or '.join(TYPE_NAMES.get(name) or listed(name) for name in types)}, not {kind(instance)}"
    if keyword == "enum" and isinstance(expected, list):
        choices = ", ".join(listed(choice) for choice in expected[:CHOICES_SHOWN])
        if len(expected) > CHOICES_SHOWN:
            choices += f" (and {len(expected) - CHOICES_SHOWN} more)"
        return f"must be one of: {choices}; got {shown(instance)}"
    if keyword == "const":
        wanted = json.dumps(expected, ensure_ascii=False, default=str)  # quoted: "yes", not yes
        return f"must be {cut(wanted, VALUE_LENGTH)}; got {shown(instance)}"
    if keyword in ("maxLength", "minLength") and isinstance(instance, str):
        if keyword == "minLength" and expected == 1:
            return "must not be empty"
        limit = "at most" if keyword == "maxLength" else "at least"
        return f"must be {limit} {_count(expected, 'character')} long (got {len(instance)})"
    if keyword in ("maxItems", "minItems") and isinstance(instance, list):
        limit = "at most" if keyword == "maxItems" else "at least"
        return f"must have {limit} {_count(expected, 'item')} (got {len(instance)})"
    if keyword in ("maxProperties", "minProperties") and isinstance(instance, dict):
        limit = "at most" if keyword == "maxProperties" else "at least"
        return f"must have {limit} {_count(expected, 'property', 'properties')} (got {len(instance)})"
    bounds = {
        "maximum": "at most",
        "minimum": "at least",
        "exclusiveMaximum": "less than",
        "exclusiveMinimum": "greater than",
        "multipleOf": "a multiple of",
    }
    if keyword in bounds:
        return f"must be {bounds[keyword]} {listed(expected)}; got {shown(instance)}"
    if keyword == "pattern":
        return f"must match the pattern {cut(str(expected), 2 * NAME_LENGTH)}; got {shown(instance)}"
    if keyword == "format":
        return f"must be a valid {cut(str(expected), NAME_LENGTH)}; got {shown(instance)}"
    if keyword in ("required", "dependencies", "dependentRequired"):
        return error.message  # names from the schema alone: "'email' is a required property"
    messages = {
        "uniqueItems": "must not hold the same item twice",
        "contains": "must hold at least one item that satisfies its schema",
        "additionalItems": "has more items than its schema allows",
        "additionalProperties": "has properties its schema does not allow",
        "not": "must not satisfy the schema given under 'not'",
        "anyOf": "does not satisfy any of the schemas it may take (anyOf)",
        "allOf": "does not satisfy all of its schemas (allOf)",
        None: "is not allowed here",  # a ``false`` schema
    }
    if keyword == "oneOf":
        if error.context:
            return "does not satisfy any of the schemas it may take (oneOf)"
        return "satisfies more than one of the schemas it may take, where it must satisfy exactly one (oneOf)"
    return messages.get(keyword, f"does not satisfy its schema's {cut(str(keyword), NAME_LENGTH)!r}")


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character no text column can store (see :data:`UNSTORABLE`)."""
    return UNSTORABLE.search(text) is not None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259)")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} is beyond the range of a number")
    return number


def _integer(text: str) -> int:
    # Python's own refusal of a longer one advises the site's code (sys.set_int_max_str_digits), not the client.
    digits = len(text) - text.startswith("-")
    if digits > MAX_DIGITS:
        raise ValueError(f"an integer of {digits} digits is longer than the {MAX_DIGITS} digits a number may have")
    return int(text)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        name = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"the name {shown(name)} is given twice in one object; each name may appear once")
    return data


def decode(body: bytes | str) -> Any:
    """``body`` as JSON, and only JSON: ``NaN``, ``Infinity`` and numbers out of a float's range raise
    ``ValueError`` as any other syntax error does; so do an integer of more than :data:`MAX_DIGITS` digits and an
    object that gives a name twice (RFC 8259 §4: which one counts "is unpredictable"; I-JSON forbids it), so that
    the site and anything between it and the agent cannot read one body two ways."""
    return json.loads(
        body, parse_constant=_no_constant, parse_float=_finite, parse_int=_integer, object_pairs_hook=_unique
    )


def load_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object whose every string can be stored (see :func:`check_values`)."""
    try:
        data = decode(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"The body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise InvalidInput(f"The body is nested too deeply (more than {MAX_DEPTH} levels).") from None
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.")
    check_values(data)
    return data


def check_values(data: Any) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` and unstorable strings, keys included, naming the field.

    Iterative, so the walk itself cannot exhaust the stack."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise InvalidInput(f"The body is nested too deeply (more than {MAX_DEPTH} levels).")
        if isinstance(value, str):
            if unstorable(value):
                name = dotted(path)
                raise InvalidInput(f"{name} {UNSTORABLE_MESSAGE}", fields=[name])
        elif isinstance(value, dict):
            for key, item in value.items():
                if unstorable(key):
                    name = dotted(path)
                    raise InvalidInput(f"A key in {name} {UNSTORABLE_MESSAGE}", fields=[name])
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))


def check_query(query: str, field_name: str = "query") -> None:
    """Whitespace, zero-width and other format characters, punctuation: nothing to search for or act on."""
    if not any(char.isalnum() for char in query):
        raise InvalidInput(f"{field_name} must contain at least one letter or digit.", fields=[field_name])


def moment(value: str | None, field_name: str) -> datetime.datetime | None:
    """The date ``value`` in UTC (a day alone is its midnight UTC), or None for None."""
    if value is None:
        return None
    refused = InvalidInput(
        f"{field_name} must be an existing ISO 8601 date or datetime in ASCII digits, with a UTC offset of at most "
        "14 hours (e.g. 2025-01-31 or 2025-01-31T09:00:00+01:00).",
        fields=[field_name],
    )
    if not isinstance(value, str) or not value.isascii():  # the parsers' \d also matches other scripts' digits
        raise refused
    try:
        parsed = parse_datetime(value)
        if parsed is None and (day := parse_date(value)) is not None:
            parsed = datetime.datetime.combine(day, datetime.time.min)
    except ValueError:  # well formed, but no such day or time (2025-02-30, T25:00, year 0)
        raise refused from None
    if parsed is None:
        raise refused
    if parsed.tzinfo is None:
        parsed = make_aware(parsed, datetime.timezone.utc)
    offset = parsed.utcoffset()
    if offset is None or abs(offset) > MAX_UTC_OFFSET:
        raise refused
    try:
        return parsed.astimezone(datetime.timezone.utc)
    except OverflowError:  # before year 1 or after 9999 once in UTC
        raise refused from None


def date_range(after: datetime.datetime | None, before: datetime.datetime | None, fields: list[str]) -> None:
    """Refuse bounds no moment meets (``after`` later than ``before``, both inclusive), naming ``fields``: an agent
    that swapped them would otherwise get an empty answer, as if the site had nothing from then."""
    if after is not None and before is not None and after > before:
        raise InvalidInput(
            f"{' and '.join(fields)} leave no date to search: the range starts at {after.isoformat()} and ends "
            f"before it, at {before.isoformat()} (UTC).",
            fields=fields,
        )
