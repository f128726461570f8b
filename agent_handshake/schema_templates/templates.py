"""Schema templates (draft-zhou-structured-data-schema-interaction-00 §4) as the front door serves them, and the
checks a structured payload must pass before the concierge runs it.

A capability is a *scenario*; its template (one key per ``input_schema`` property, the proposed keys editors
approved, and the reserved ``other`` key) is built, versioned and published by the concierge
(:mod:`agent_handshake.concierge.template_publishing`: :func:`current`), so that ``schema_id``
(``<scenario>_v<version>``) names one content. Here it is rendered as the draft's ``get_schema_template`` answers it
(:func:`render`), a payload is checked against it (:func:`check_payload`), and the keys proposed from what agents put
in ``other`` are announced (:func:`update_suggestion`). Which keys are security-relevant (:func:`security_relevant`)
decides who may change how they are described in the admin.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from ..concierge import errors
from ..concierge.invocation import validator
from ..concierge.template_publishing import OTHER, current, language_tag
from ..concierge.validation import MAX_PROBLEMS, named
from ..registry import Capability, capability_registry

if TYPE_CHECKING:
    from ..models import ProposedField, SchemaTemplate

MAX_OTHER_CHARS = 1000
PENDING_DESCRIPTION = (
    "A key the site is considering, because agents often put the same kind of request in 'other'. It is not "
    "accepted yet: keep sending it in 'other'. Once editors approve it, the template's next version names it."
)
SCHEMA_ID = re.compile(r"(?P<scenario>[A-Za-z0-9_.-]{1,64})_v(?P<version>[1-9][0-9]{0,8})")
#: Words of a key's name that make it about identity, payment or access: changing how such a key is described
#: needs the ``change_security_keys`` permission (§8: schema updates touching security-relevant keys need
#: authorisation). A name is read as its words however it is written (``card_number``, ``cardNumber``,
#: ``billing-address``), and one written as a single word counts when it begins or ends with one of the longer
#: words (``emailaddress``, ``creditcard``; see :func:`security_relevant`).
SECURITY_WORDS = frozenset(
    "email mail password passcode pin payment pay card iban account token secret auth identity phone address "
    "ssn credit debit cvv cvc otp bank login username credential credentials passport apikey cardnumber "
    "cardholder".split()
)
#: The words a single-word name is matched against at its start or end: the shorter ones would find "author",
#: "cardigan", "shipping" ("pin") or "display" ("pay").
COMPOUNDED_WORDS = frozenset(word for word in SECURITY_WORDS if len(word) >= 5)
EMAIL_FORMATS = frozenset({"email", "idn-email"})


def offered() -> list[Capability]:
    """The scenarios: MODE3 capabilities on offer that declare their input."""
    return [
        c
        for c in capability_registry.available()
        if c.mode == "MODE3" and c.handler is not None and c.action_type and c.input_schema is not None
    ]


def refused_names(names: Iterable[str]) -> tuple[list[str], str]:
    """Names the client chose (keys, members) as a refusal gives them, so that it never grows with what was sent:
    each cut (:func:`~agent_handshake.concierge.validation.named`), sorted, at most
    :data:`~agent_handshake.concierge.validation.MAX_PROBLEMS` of them for ``fields``, and the words that list them
    with the rest counted ("a, b and 3 more", as AHP's capability operations say it)."""
    cut = sorted({named(str(name)) for name in names})
    shown = cut[:MAX_PROBLEMS]
    more = f" and {len(cut) - MAX_PROBLEMS} more" if len(cut) > MAX_PROBLEMS else ""
    return shown, ", ".join(shown) + more


def scenario(name: str) -> Capability:
    capability = next((c for c in offered() if c.name == name), None)
    if capability is None:
        raise errors.NotFound(
            f"No scenario is named {named(name)!r}.",
            code="unknown_scenario",
            available_scenarios=[c.name for c in offered()],
        )
    return capability


def security_relevant(capability: Capability, key_name: str) -> bool:
    """Whether a key is security-relevant: every key of a capability that needs credentials (its keys steer
    what runs under them), and elsewhere a key about identity, payment or access: an email format, or a name whose
    words (:func:`name_words`), two neighbours of them, or the whole name run together are one of
    :data:`SECURITY_WORDS` or begin or end with one of :data:`COMPOUNDED_WORDS`. In doubt it is: a false alarm
    costs an editor a colleague's permission, a miss lets anyone with the editor role rewrite it."""
    if capability.requires_auth:
        return True
    spec = (capability.input_schema or {}).get("properties", {}).get(key_name, {})
    if isinstance(spec, dict) and spec.get("format") in EMAIL_FORMATS:
        return True
    words = name_words(key_name)
    # Each word, each two neighbours written as one (api_key, credit_card) and the whole name run together.
    candidates = {*words, *(a + b for a, b in itertools.pairwise(words)), "".join(words)}
    return any(
        candidate in SECURITY_WORDS
        or any(candidate.startswith(word) or candidate.endswith(word) for word in COMPOUNDED_WORDS)
        for candidate in candidates
    )


def name_words(key_name: str) -> list[str]:
    """A key's name as lower-case words, however it is written: ``cardNumber``, ``APIKey``, ``card_number``,
    ``card-number`` and ``card number`` are all ``["card", "number"]``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", key_name)
    return [word.lower() for word in re.findall(r"[^\W_]+", spaced)]


def language_of(published: dict[str, Any], preferred: str | None) -> tuple[str, dict[str, str]]:
    """The language to describe the keys in (an editor's translation for ``preferred`` or its primary subtag,
    else the site's ``LANGUAGE_CODE``) and that language's texts."""
    translations = published.get("translations") or {}
    if preferred:
        tag = language_tag(preferred)
        for candidate in (tag, tag.split("-")[0]):
            if candidate in translations:
                return candidate, translations[candidate]
    return settings.LANGUAGE_CODE, {}


def render(row: SchemaTemplate, preferred_language: str | None = None) -> dict[str, Any]:
    """The template as the draft's ``get_schema_template`` answers it (§4.1, Appendix A), with our extensions:
    ``language``, ``description``, ``response_schema`` and a proposed key's ``lifecycle``."""
    published = row.published
    language, texts = language_of(published, preferred_language)
    keys = [{**key, "semantic_description": texts.get(key["key_name"], key["semantic_description"])}
            for key in published["keys"]]  # fmt: skip
    template: dict[str, Any] = {
        "schema_id": row.schema_id,
        "scenario": row.scenario,
        "keys": keys,
        "language": language,
        "description": published.get("description", ""),
    }
    if published.get("response_schema") is not None:
        template["response_schema"] = published["response_schema"]
    return template


# --- a structured payload -----------------------------------------------------------------------------------------


def parse_schema_id(schema_id: Any) -> tuple[Capability, SchemaTemplate]:
    """The scenario and its current template for a payload's ``schema_id``. A payload naming an earlier version
    is checked against the current template (most changes only add keys or describe them better; a retired key
    is refused as unknown, a key made required is asked for); a version the site never published is refused."""
    if not isinstance(schema_id, str) or not (match := SCHEMA_ID.fullmatch(schema_id)):
        raise errors.InvalidInput(
            "schema_id must name a template as <scenario>_v<version>, as get_schema_template returns it.",
            code="invalid_schema_id",
            fields=["schema_id"],
        )
    capability = scenario(match["scenario"])
    row = current(capability, at_least=int(match["version"]))
    if int(match["version"]) > row.version:
        raise errors.InvalidInput(
            f"{schema_id} was never published: the current template is {row.schema_id}.",
            code="unknown_schema_version",
            fields=["schema_id"],
            current_schema_id=row.schema_id,
        )
    return capability, row


@dataclass
class Payload:
    """A payload checked against its template: the capability's input (defaults applied), the ``other`` text,
    and the values of proposed keys."""

    input: dict[str, Any]
    other: str = ""
    proposed: dict[str, Any] = field(default_factory=dict)


def check_payload(capability: Capability, row: SchemaTemplate, payload: Any) -> Payload:
    """``payload`` against the template: a key it does not define is refused (``unknown_key``), a value whose
    JSON type the capability's schema refuses too (``invalid_type``), a missing required key (``missing_field``),
    each naming the keys; a null counts as not given, and a missing optional key gets its ``default_value``. What
    else the schema says (patterns, ranges, formats) the concierge checks when it runs the capability. A proposed
    key's value is checked against its ``key_type``; the error of a proposed key names it in
    ``details["proposed"]`` (its validation failures are counted)."""
    if not isinstance(payload, dict):
        raise errors.InvalidInput("payload must be a JSON object of key_name: value.", fields=["payload"])
    keys = {key["key_name"]: key for key in row.published["keys"]}
    unknown, listed = refused_names(name for name in payload if name not in keys)
    if unknown:
        raise errors.InvalidInput(
            f"payload has keys {row.schema_id} does not define: {listed} (put what no key holds in {OTHER!r}).",
            code="unknown_key",
            fields=[f"payload.{name}" for name in unknown],
        )
    checked = Payload(input={})
    for name, key in keys.items():
        value = payload.get(name)
        value = key["default_value"] if value is None else value
        if value is None:
            continue
        if name == OTHER:
            checked.other = value
        elif "lifecycle" in key:
            checked.proposed[name] = value
        else:
            checked.input[name] = value
    schema = capability.input_schema or {}
    properties = schema.get("properties", {})
    wrong = sorted(
        {str(error.absolute_path[0]) for error in validator(schema).iter_errors(checked.input)
         if error.validator == "type" and len(error.absolute_path) == 1}
        | {name for name, value in checked.proposed.items()
           if not validator({"type": keys[name]["key_type"]}).is_valid(value)}
        | ({OTHER} if not isinstance(checked.other, str) else set())
    )  # fmt: skip
    if wrong:
        detail = "; ".join(f"{name} must be a {keys[name]['key_type']}" for name in wrong)
        raise errors.InvalidInput(
            f"payload has values of the wrong type: {detail}.",
            code="invalid_type",
            fields=[f"payload.{name}" for name in wrong],
            proposed=[name for name in wrong if name in checked.proposed],
        )
    missing = [name for name in schema.get("required", []) if name in properties and name not in checked.input]
    if missing:
        raise errors.MissingInput(
            f"{row.schema_id} requires: {', '.join(missing)}.", fields=[f"payload.{name}" for name in missing]
        )
    if len(checked.other) > MAX_OTHER_CHARS:
        raise errors.InvalidInput(f"payload.{OTHER} is over {MAX_OTHER_CHARS} characters.", fields=[f"payload.{OTHER}"])
    # A proposed key's value reaches the capability when its input_schema lets unknown properties through (JSON
    # Schema's default); the site sees its use in the admin either way.
    if schema.get("additionalProperties", True) is not False:
        checked.input.update(checked.proposed)
    return checked


def update_suggestion(pending: list[ProposedField]) -> dict[str, Any] | None:
    """The draft's ``schema_update_suggestion`` (Appendix A) for keys proposed and not yet decided. They are not
    accepted in payloads until an editor approves them, and they are announced under a neutral name and a fixed
    description: a proposal is made of a few agents' words, which no other agent sees before an editor has."""
    if not pending:
        return None
    return {
        "new_keys": [
            {
                "key_name": f"proposed_key_{proposal.pk}",
                "key_type": proposal.value_type,
                "required": False,
                "default_value": None,
                "semantic_description": PENDING_DESCRIPTION,
                "lifecycle": "proposed",
            }
            for proposal in pending
        ]
    }
