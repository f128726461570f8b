"""Slot filling: a capability's input gathered over several messages, whatever protocol carries them.

A front door keeps what was gathered so far and the fields its last question asked for (in its own store: a
session, a stored interaction); each new message gives text, values by name, or both. :func:`fill` reads the text
as every door reads it (:func:`~.invocation.answer_input`: a plain answer to a one-field question is that field's
value), lays the named values over it (a later value corrects an earlier one), checks the whole against the
capability's ``input_schema`` and returns a :class:`Filling`: the values, and either nothing more to ask (the input
is complete and valid) or the :class:`Question` that asks for what is still needed. A value the schema refuses is
dropped and asked for again, even for an optional field: run without it, the action would do something other than
what was asked (a table for one where twenty were asked for).

A door that refuses an invalid value instead (AHP: a 400 naming the field) gathers with :func:`gather` alone and
checks what it got itself. The values given by name are checked first by the door: :func:`unknown_fields` and
:func:`mistyped` say what no field takes, for the door to refuse in its own words before anything changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..registry import Capability
from .invocation import answer_input, check_input, field_described, field_question

#: How a door reads a message's text for a capability's input: ``(capability, text, asked) -> {field: value}``,
#: ``asked`` being the fields its last question asked for and still lacks (:func:`~.invocation.answer_input`).
Reader = Callable[[Capability, str, Sequence[str]], dict[str, Any]]


@dataclass
class Gathered:
    """What a message added to the values gathered before it (:func:`gather`)."""

    values: dict[str, Any]
    #: The fields the last question asked for that were still missing before this message (None: the message
    #: answered no question, e.g. it stated the intent).
    asked: list[str] | None = None

    @property
    def answered(self) -> list[str] | None:
        """Of the fields asked for, those the values now have (None: the message answered no question)."""
        return None if self.asked is None else [name for name in self.asked if name in self.values]


@dataclass(frozen=True)
class Refusal:
    """A value the ``input_schema`` refused, dropped from the values so that it is asked for again."""

    #: Where the schema refused it: ``party_size``, ``items.0.sku``, ``(input)`` for the input as a whole.
    path: str
    message: str
    #: The top-level field ``path`` is in (``items`` for ``items.0.sku``).
    field: str
    #: That field's value as the message left it ("" when it has none).
    value: Any = ""


@dataclass(frozen=True)
class Question:
    """The question for the fields still needed."""

    #: The fields asked for: the required ones still missing, then the optional ones whose value was refused.
    fields: list[str]
    #: The question in words (:func:`~.invocation.field_question`), which says first what the answer gave.
    text: str
    #: Each field of :attr:`fields` as ``name: description`` (with the allowed values of an enum).
    described: list[str]
    #: Of the fields the last question asked for, those the answer gave (None: the message answered no question).
    answered: list[str] | None = None
    #: Of :attr:`fields`, the optional ones whose value was refused: a valid value, or none at all, will do.
    optional: list[str] = field(default_factory=list)


@dataclass
class Filling:
    """The values gathered after a message, and what is still to ask (:func:`fill`)."""

    values: dict[str, Any]
    #: The question for what is still needed; None when the values are complete and valid input.
    question: Question | None
    #: The values the schema refused in this message, in the order of their paths.
    refused: list[Refusal] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.question is None


def properties_of(capability: Capability) -> dict[str, Any]:
    """The input fields ``capability`` declares, by name."""
    return (capability.input_schema or {}).get("properties", {})


def missing(capability: Capability, values: Mapping[str, Any]) -> list[str]:
    """The required fields ``values`` lacks."""
    problem = check_input(capability, dict(values))
    return problem.missing if problem else []


def gather(
    capability: Capability,
    collected: Mapping[str, Any],
    texts: Sequence[str] = (),
    *,
    given: Mapping[str, Any] | None = None,
    asked: Sequence[str] | None = None,
    read: Reader = answer_input,
) -> Gathered:
    """``collected``, then what each of ``texts`` states (read with ``read``), then the values ``given`` by name: a
    later value of a field replaces an earlier one. Nothing is checked here.

    ``asked``: None when the texts answer no question (the intent itself); else the fields the last question asked
    for, of which those ``collected`` still lacks are the ones an answer is read for (empty: a question whose
    fields were not kept asked for what was missing)."""
    values = dict(collected)
    still: list[str] | None = None
    if asked is not None:
        still = [name for name in (list(asked) or missing(capability, values)) if name not in values]
    for text in texts:
        values.update(read(capability, text, still or []))
    values.update(given or {})
    return Gathered(values, still)


def question(
    capability: Capability,
    fields: Sequence[str],
    answered: Sequence[str] | None = None,
    *,
    optional: Sequence[str] = (),
) -> Question:
    """The question for ``fields``; ``answered``: the fields the last question asked for that the answer gave
    (None: it answered none); ``optional``: those of ``fields`` that may also be left out."""
    fields = list(fields)
    answered = None if answered is None else list(answered)
    return Question(
        fields=fields,
        text=field_question(capability, fields, answered),
        described=[field_described(capability, name) for name in fields],
        answered=answered,
        optional=list(optional),
    )


def fill(
    capability: Capability,
    collected: Mapping[str, Any],
    texts: Sequence[str] = (),
    *,
    given: Mapping[str, Any] | None = None,
    asked: Sequence[str] | None = None,
    read: Reader = answer_input,
) -> Filling:
    """The values after a message (:func:`gather`, same arguments), checked: complete, or the question for the
    required fields still missing and the fields whose value the schema refused (dropped, each a :class:`Refusal`;
    an optional one is asked for again too, and may then be left out)."""
    gathered = gather(capability, collected, texts, given=given, asked=asked, read=read)
    values = gathered.values
    problem = check_input(capability, values)
    refusals: list[Refusal] = []
    redo: list[str] = []  # the fields refused, each once, in the order of their first refusal
    if problem is not None and problem.invalid:
        properties = properties_of(capability)
        for path, message in sorted(problem.invalid.items()):
            name = path.split(".")[0]
            refusals.append(Refusal(path, message, name, gathered.values.get(name, "")))
            if name in properties and name not in redo:
                redo.append(name)
        dropped = {refusal.field for refusal in refusals}
        values = {name: value for name, value in values.items() if name not in dropped}
        problem = check_input(capability, values)
    if problem is None and not redo:
        return Filling(values, None, refusals)
    still = problem.missing if problem is not None else []
    optional = [name for name in redo if name not in still]
    answered = None if gathered.asked is None else [name for name in gathered.asked if name in values]
    return Filling(values, question(capability, [*still, *optional], answered, optional=optional), refusals)


def ask_again(capability: Capability, values: Mapping[str, Any], fields: Sequence[str]) -> Filling:
    """``values`` without ``fields``, which the capability refused when it ran (a slot already taken, a date out of
    range), and the question for them: the required fields then missing, else ``fields`` themselves."""
    kept = {name: value for name, value in values.items() if name not in fields}
    problem = check_input(capability, kept)
    return Filling(kept, question(capability, problem.missing if problem else list(fields)))


# --- values given by name ------------------------------------------------------------------------------------------


def unknown_fields(capability: Capability, values: Mapping[str, Any]) -> list[str]:
    """The names in ``values`` that are no input field of ``capability``, sorted."""
    properties = properties_of(capability)
    return sorted(name for name in values if name not in properties)


JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def json_type(value: Any) -> str:
    """``value``'s JSON type, as JSON Schema names it."""
    return "null" if value is None else JSON_TYPES.get(type(value), type(value).__name__)


def json_types(spec: Any) -> list[str]:
    """The JSON types a field's schema takes (its ``type``, else those of its ``enum`` or ``const``); [] when it does
    not say."""
    if not isinstance(spec, dict):
        return []
    kinds = spec.get("type")
    if isinstance(kinds, str):
        return [kinds]
    if isinstance(kinds, list):
        return [kind for kind in kinds if isinstance(kind, str)]
    options = spec["enum"] if isinstance(spec.get("enum"), list) else [spec["const"]] if "const" in spec else []
    return sorted({json_type(option) for option in options})


def type_fits(value: Any, kinds: list[str]) -> bool:
    """Whether ``value`` is of one of the JSON types ``kinds`` (an integer is a number; 2.0 is an integer)."""
    kind = json_type(value)
    if kind == "integer" and "number" in kinds:
        return True
    if kind == "number" and "integer" in kinds and float(value).is_integer():  # 2.0 is an integer to JSON Schema
        return True
    return kind in kinds


def mistyped(capability: Capability, values: Mapping[str, Any]) -> dict[str, list[str]]:
    """The values given by name that are of a JSON type their field does not take (a number for a date, null, a
    list for a time), each with the types it takes: a malformed message rather than an answer to ask again about
    (a value of the right type that the field still refuses, a date that does not exist, is :func:`fill`'s)."""
    properties = properties_of(capability)
    return {name: kinds for name, value in values.items()
            if (kinds := json_types(properties.get(name))) and not type_fits(value, kinds)}  # fmt: skip


def labels(capability: Capability) -> dict[str, str]:
    """Each input field's label for a person: its schema's ``title``, else its name in words."""
    return {
        name: (spec.get("title") or name.replace("_", " ").capitalize())
        for name, spec in properties_of(capability).items()
    }
