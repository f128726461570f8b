"""MODE3 capabilities (AHP §5.3): declared once in Python, served by every protocol binding.

A site declares one with the :func:`capability` decorator::

    @agent_handshake.capability(
        description="The status of an order, by its number and the customer's email address.",
        action_type="query",
        scope="orders",
        input_schema={"type": "object", "required": ["order_number", "email"], "properties": {...}},
        output_schema={"type": "object", "required": ["status"], "properties": {...}},
    )
    def order_status(invocation: Invocation) -> Outcome:
        ...
        return Outcome({"status": order.status}, answer=f"Order {order.number} is {order.status}.")

The function receives an :class:`Invocation` whose ``input`` has already been validated against
``input_schema``; what it returns is validated against ``output_schema`` before any agent sees it. It raises
:class:`ActionFailed` for an expected refusal (a slot already taken); the agent gets that message. For an
``async`` capability it runs on a Celery worker, or returns :class:`Deferred` when something else will finish
the job (:mod:`agent_handshake.concierge.desk`, the human desk).

Structured input travels in ``context.input`` (an object); with none, the free-text ``query`` is mapped to the
schema where that is deterministic (:func:`extract_input`), and what is still missing is asked for with
``clarification_needed``; every front door reads the answer to that question with :func:`answer_input`.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import itertools
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

from ..registry import Capability, capability_registry
from . import errors
from .validation import MAX_PROBLEMS, dotted, schema_error_fields, schema_message

if TYPE_CHECKING:
    from ..identity.auth import Credentials
    from ..models import AgentClient, ApiKey, Job

DEFAULT_RESPONSE_TYPES = {
    "query": ["application/data", "text/answer"],
    "action": ["application/action-result", "text/answer"],
    "async": ["application/action-result", "text/answer"],
}


@dataclass
class Invocation:
    """One call of a MODE3 capability: validated input, the caller, and the job when it runs asynchronously."""

    capability: Capability
    input: dict[str, Any]
    query: str = ""
    key: ApiKey | None = None
    requesting_agent: str = ""
    job: Job | None = None

    @property
    def client(self) -> AgentClient | None:
        return self.key.client if self.key else None

    def cancelled(self) -> bool:
        """Whether the caller has cancelled this async job: a long handler may check it and stop early (its
        result is discarded and its writes rolled back either way)."""
        if self.job is None:
            return False
        # Not at import: this module is the public API, loaded before the app registry is ready.
        from ..models import CancelRequest

        return CancelRequest.objects.filter(job_id=self.job.pk).exists()


@dataclass
class Outcome:
    """What a capability did: ``data`` (valid against its ``output_schema``), a plain-language ``answer`` and,
    for actions, the ``side_effects`` an agent should know of (``{"type", "description"}``)."""

    data: dict[str, Any]
    answer: str = ""
    side_effects: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Deferred:
    """An async job that stays pending until something outside the worker completes it."""

    progress: str
    expires_in: int | None = None
    eta_seconds: int | None = None
    needs_operator: bool = False


class ActionFailed(Exception):
    """An expected refusal, reported to the agent as an AHP error (sync) or a ``failed`` job (async)."""

    def __init__(self, message: str, *, code: str = "invalid_request", status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.extra = extra


class OutputInvalid(Exception):
    """The capability returned data its ``output_schema`` refuses: a bug of the site, never sent to agents."""


def capability(
    name: str | None = None,
    *,
    description: str,
    action_type: str = "query",
    input_schema: dict[str, Any],
    output_schema: dict[str, Any],
    response_types: list[str] | None = None,
    accept_fallback: bool = True,
    scope: str | None = None,
    rate_limit: str | None = None,
    extract: Callable[[str], dict[str, Any]] | None = None,
    eta_seconds: int | None = None,
    available: Callable[[], bool] | None = None,
    applies_to: dict[str, Callable[[Any], dict[str, Any]]] | None = None,
    action_schema_type: str | None = None,
    intent: str = "",
    examples: tuple[str, ...] | list[str] = (),
    constraints: tuple[str, ...] | list[str] = (),
    notes: tuple[str, ...] | list[str] = (),
    external_id: str | None = None,
) -> Callable[[Callable[[Invocation], Any]], Callable[[Invocation], Any]]:
    """Declare a MODE3 capability in the one capability registry; see the module docstring."""

    def decorator(func: Callable[[Invocation], Any]) -> Callable[[Invocation], Any]:
        declared = Capability(
            name=name or func.__name__,
            description=description,
            mode="MODE3",
            response_types=list(response_types or DEFAULT_RESPONSE_TYPES.get(action_type, ["text/answer"])),
            accept_fallback=accept_fallback,
            action_type=action_type,
            input_schema=input_schema,
            output_schema=output_schema,
            scope=scope,
            rate_limit=rate_limit,
            extract=extract,
            eta_seconds=eta_seconds,
            handler=func,
            available=available,
            applies_to={label.lower(): prefill for label, prefill in (applies_to or {}).items()},
            action_schema_type=action_schema_type,
            intent=intent,
            examples=tuple(examples),
            constraints=tuple(constraints),
            notes=tuple(notes),
            external_id=external_id,
        )
        capability_registry.register(declared)
        func.capability = declared  # type: ignore[attr-defined]
        return func

    return decorator


def authorize(capability: Capability, credentials: Credentials | None) -> None:
    """Refuse a call of ``capability`` that lacks the credentials it needs (401) or whose key lacks its scope (403)."""
    from ..insights import recording  # not at import: this module is the public API, loaded before the models

    recording.note(capability=capability.name)  # a refusal here is recorded against the capability asked for
    if not capability.requires_auth:
        return
    if credentials is None:
        raise errors.AuthRequired(f"The capability {capability.name!r} requires authentication.")
    if not credentials.key.allows(capability.scope):
        raise errors.Forbidden(
            f"This API key does not have the scope {capability.scope!r} that {capability.name!r} requires."
        )


# --- input ------------------------------------------------------------------------------------------------------

FORMAT_CHECKER = jsonschema.Draft7Validator.FORMAT_CHECKER
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
ISO_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b")


@dataclass
class InputProblem:
    missing: list[str]
    invalid: dict[str, str]  # field path -> message


@functools.lru_cache(maxsize=64)
def python_pattern(pattern: str) -> str:
    """``pattern`` with its final ``$`` anchor (not an escaped ``\\$``) written as Python's end of string, ``\\Z``."""
    body = pattern[:-1]
    if pattern.endswith("$") and (len(body) - len(body.rstrip("\\"))) % 2 == 0:
        return body + r"\Z"
    return pattern


def ecma_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Exception]:
    """JSON Schema's ``pattern`` read as ECMA-262 reads it, the dialect JSON Schema (and the OpenAPI documents that
    publish our schemas) promises: there ``$`` is the end of the string, where Python's ``$`` also matches
    before a final newline (jsonschema uses ``re.search``), which let "conv-1\\n" through ``^[\\x21-\\x7e]{1,128}$``.
    The patterns themselves keep ``$``: ``\\Z`` in the published schema would be a literal "Z" to its readers."""
    if validator.is_type(instance, "string") and not re.search(python_pattern(pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


#: Draft 7 with ``pattern`` read as ECMA-262 reads it: the capabilities' input schemas, the AHP request and the
#: IntentWeb envelope are all checked with it (a site's ``^LK-\\d{5}$`` refuses "LK-10001\\n").
SchemaValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": ecma_pattern})


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    return SchemaValidator(schema, format_checker=FORMAT_CHECKER)


def check_input(capability: Capability, data: dict[str, Any]) -> InputProblem | None:
    """Missing required fields and invalid ones, or None when ``data`` is valid input.

    At most :data:`~.validation.MAX_PROBLEMS` fields in all: each item of an array can fail, and what a caller is
    told (and the work of finding it) should not grow with what was sent."""
    missing: list[str] = []
    invalid: dict[str, str] = {}
    for error in validator(capability.input_schema or {}).iter_errors(data):
        if len(missing) + len(invalid) >= MAX_PROBLEMS:
            break
        if error.validator == "required" and isinstance(error.instance, dict):
            prefix = dotted(error.absolute_path, "")
            for name in error.validator_value:
                path = f"{prefix}.{name}" if prefix else name
                # jsonschema reports each missing name as its own error, each carrying the whole list.
                if name not in error.instance and path not in missing:
                    missing.append(path)
        else:
            for path, message in schema_error_fields(error, "(input)")[: MAX_PROBLEMS - len(missing) - len(invalid)]:
                invalid.setdefault(path, message)
    return InputProblem(missing, invalid) if missing or invalid else None


def whole_numbers(schema: Any, value: Any) -> Any:
    """``value`` (valid against ``schema``) with each number the schema types ``integer`` as an ``int``: JSON Schema
    counts ``2.0`` as an integer, so it passes validation, and a handler should not get a float where its schema
    promises a whole number. Follows ``properties``, ``additionalProperties`` and ``items``; anything else is
    returned as it is."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, float) and value.is_integer() and schema.get("type") == "integer":
        return int(value)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {key: whole_numbers(properties.get(key, extra), item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(schema.get("items"), item) for item in value]
    return value


def _unanchored(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


def _one(values: list[str]) -> str | None:
    distinct = list(dict.fromkeys(values))
    return distinct[0] if len(distinct) == 1 else None


def extract_input(capability: Capability, text: str) -> dict[str, Any]:
    """The input fields a free-text query states unambiguously.

    First the capability's own ``extract``; then, for each top-level string property still unknown: an ``enum``
    value named in the text, a match of its ``pattern``, an email address (``format: email``), an ISO date
    (``format: date``) or time (``format: time``). A field is filled only when exactly one candidate is found.
    """
    return _extracted(capability, text)[0]


def _extracted(capability: Capability, text: str) -> tuple[dict[str, Any], set[str]]:
    """:func:`extract_input`'s fields, and the names the capability's own ``extract`` reads (those it returned,
    found or None): a field it reads is its to read, so an answer it finds nothing in is not that field's value."""
    found: dict[str, Any] = {}
    own = (capability.extract(text) or {}) if capability.extract else {}
    found.update({k: v for k, v in own.items() if v is not None})
    properties = (capability.input_schema or {}).get("properties", {})
    for name, spec in properties.items():
        if name in found or not isinstance(spec, dict) or spec.get("type", "string") != "string":
            continue
        value: str | None = None
        if "enum" in spec:
            named = [
                str(option)
                for option in spec["enum"]
                if re.search(rf"(?<!\w){re.escape(str(option))}(?!\w)", text, re.I)
            ]
            value = _one(named)
        elif "pattern" in spec:
            try:
                # Only a value standing alone: "LK-10001" is not read from inside "LK-1000100".
                standing = rf"(?<![\w-])(?:{_unanchored(spec['pattern'])})(?![\w-])"
                value = _one([m.group(0) for m in re.finditer(standing, text)])
            except re.error:
                value = None
        elif spec.get("format") == "email":
            value = _one(EMAIL.findall(text))
        elif spec.get("format") == "date":
            value = _one(ISO_DATE.findall(text))
        elif spec.get("format") == "time":
            value = _one([f"{int(h):02d}:{m}:00" for h, m in ISO_TIME.findall(text)])
        if value is not None:
            found[name] = value
    return found, set(own)


LABELLED = re.compile(r"^\s*([A-Za-z][\w \-]{0,40}?)\s*[:=]\s*(.+?)\s*$")
INTEGER = re.compile(r"(?<![\w.-])(\d{1,6})(?![\w.])")


def answer_input(capability: Capability, text: str, asked: Sequence[str] = ()) -> dict[str, Any]:
    """The input fields an answer to "I still need ``asked``" states: how every front door reads an agent's answer
    to the site's question for missing input (AHP's clarification, MCP's missing_field, NLWeb's elicitation,
    IntentWeb's information_request).

    :func:`extract_input`, then ``field: value`` parts naming a property (by its name, with spaces for underscores;
    parts are lines, ``;``-separated, or ``,``-separated where the next part starts with a label; a list's value
    runs on over the unlabelled parts after it), each value read as its property takes it (:func:`labelled_value`),
    and, when exactly one field was asked for and the answer gave nothing else: an integer field takes the
    answer's one integer, a free-text string field (no enum, pattern or format, and not one the capability's own
    ``extract`` reads) the whole answer. With several fields asked, an unlabelled answer fills only what the
    extractors read in it: which words would be which field is a guess. Values are not validated here (the caller
    checks them against the ``input_schema``)."""
    properties = (capability.input_schema or {}).get("properties", {})
    found, own = _extracted(capability, text)
    names = {name.lower().replace("_", " "): name for name in properties}
    labelled_parts: dict[str, list[str]] = {}
    current: str | None = None
    for part in answer_parts(text, names):
        labelled = LABELLED.match(part)
        name = names.get(labelled.group(1).strip().lower().replace("_", " ")) if labelled else None
        if labelled and name is not None:
            current = name
            labelled_parts[name] = [labelled.group(2).strip()]
        elif current is not None and part.strip() and _kind(properties[current]) == "array":
            labelled_parts[current].append(part.strip())  # "items: 12 x LK-1; 3 x LK-2": one list
    for name, parts in labelled_parts.items():
        found[name] = labelled_value(capability, name, "; ".join(parts).rstrip("."))
    if len(asked) == 1 and not found and asked[0] in properties and asked[0] not in own:
        name, spec = asked[0], properties[asked[0]]
        if spec.get("type") == "integer":
            numbers = INTEGER.findall(text)
            if len(numbers) == 1:
                found[name] = int(numbers[0])
        elif spec.get("type", "string") == "string" and not {"enum", "pattern", "format"} & set(spec):
            value = text.strip().rstrip(".").strip()
            if value:
                found[name] = value
    return found


def answer_parts(text: str, labels: Collection[str]) -> list[str]:
    """``text`` cut into the parts that may each be ``label: value``: at line ends and ``;``, and at a comma that a
    property's label follows ("name: Ada Lovelace, email: ada@example.com"; the words of "items: 12 x LK-1, 3 x
    LK-2" stay one part)."""
    parts = re.split(r"[;\n]", text)
    if not labels:
        return parts
    named = "|".join(re.escape(label).replace(r"\ ", r"[ _]") for label in sorted(labels, key=len, reverse=True))
    before_label = re.compile(rf",\s*(?=(?:{named})\s*[:=])", re.I)
    return [piece for part in parts for piece in before_label.split(part)]


def labelled_value(capability: Capability, name: str, value: str) -> Any:
    """The value an answer gives the property ``name`` by its label ("items: 12 x LK-TEA-0001"), as the input
    takes it: a text field takes the words as written; any other is read from them as the capability reads a
    message (its ``extract``), else as its JSON type plainly says ("2", "yes"). Taken as written, a list or a
    number was refused for its type however the agent answered; what still does not fit is the caller's
    validation error naming the field."""
    spec = (capability.input_schema or {}).get("properties", {}).get(name)
    spec = spec if isinstance(spec, dict) else {}
    if _kind(spec) == "string":
        return value
    read = extract_input(capability, value).get(name)
    return read if read is not None else _typed(spec, value)


def _kind(spec: Any) -> Any:
    """A property's JSON type, "string" when it names none or allows a string among others."""
    kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
    return "string" if isinstance(kind, list) and "string" in kind else kind


def _typed(spec: dict[str, Any], value: str) -> Any:
    """A labelled value as its property's JSON type where it plainly is one ("2" for an integer)."""
    if spec.get("type") in ("integer", "number") and re.fullmatch(r"-?\d{1,9}", value):
        return int(value)
    if spec.get("type") == "number" and re.fullmatch(r"-?\d{1,15}\.\d{1,15}", value):
        return float(value)
    if spec.get("type") == "boolean" and value.lower() in ("yes", "no", "true", "false"):
        return value.lower() in ("yes", "true")
    return value


def field_described(capability: Capability, name: str) -> str:
    """``name: description`` from the input schema (else its title, else the name in words), with the allowed
    values of an enum."""
    spec = (capability.input_schema or {}).get("properties", {}).get(name, {})
    described = spec.get("description") or spec.get("title") or name.replace("_", " ")
    hint = f" (one of: {', '.join(map(str, spec['enum']))})" if "enum" in spec else ""
    return f"{name}: {described}{hint}"


def field_question(capability: Capability, missing: list[str], answered: Sequence[str] | None = None) -> str:
    """A clarification question naming the missing fields with their descriptions; with several, how to label
    the values in one answer. ``answered``: the fields asked for that the agent's answer to the last question
    filled (None: no question was answered), said first, so an agent sees what was taken and what was not."""
    parts = [field_described(capability, name) for name in missing]
    question = f"To {capability.name.replace('_', ' ')}, I still need: " + "; ".join(parts) + "."
    if len(missing) > 1:
        example = "; ".join(f"{name}: ..." for name in missing[:3])
        question += f' Give each value after its name, one per line or separated by ";" ("{example}").'
    if answered is None:
        return question
    if answered:
        return f"Thank you: I have {', '.join(answered)} now. {question}"
    return f"Your answer did not give what I asked for. {question}"


# --- output -----------------------------------------------------------------------------------------------------


def check_output(capability: Capability, outcome: Any) -> Outcome:
    """The outcome, if it is an :class:`Outcome` (or a plain dict) valid against ``output_schema``."""
    if isinstance(outcome, dict):
        outcome = Outcome(outcome)
    if not isinstance(outcome, Outcome):
        raise OutputInvalid(f"{capability.name} returned {type(outcome).__name__}, not an Outcome or a dict.")
    outcome.data = json_safe(outcome.data)
    errors = list(itertools.islice(validator(capability.output_schema or {}).iter_errors(outcome.data), 5))
    if errors:
        # Described, not quoted: the output may carry the caller's input back, of any size, into the log.
        detail = "; ".join(
            f"{dotted(error.absolute_path, '(output)')}: {schema_message(error)}" for error in errors[:5]
        )
        raise OutputInvalid(f"{capability.name} returned output that does not match its output_schema: {detail}")
    return outcome


def json_safe(value: Any) -> Any:
    """Dates and decimals in handler output, as JSON-ready strings (validated after this)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
