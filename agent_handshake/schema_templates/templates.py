"""Schema templates (draft-zhou-structured-data-schema-interaction-00 §4): a MODE3 capability's input as typed keys
with semantic descriptions, and the checks a structured payload must pass before the concierge runs it.

A capability is a *scenario*; its template is built from what the site already declares, never declared again:

- one key per ``input_schema`` property: ``key_type`` its JSON type, ``required`` from the schema, ``default_value``
  its ``default``, and a ``semantic_description`` written from its description, allowed values, format, pattern
  and bounds, unless an editor wrote one (``SchemaKeyText`` in the admin, per language);
- the proposed keys editors approved (``ProposedField``, ``experimental`` then ``stable``: the draft's two-phase
  lifecycle), marked with ``lifecycle``;
- the reserved ``other`` key, last, in every template.

The template is published in a :class:`~agent_handshake.models.SchemaTemplate` row: :func:`publish` rebuilds it
and raises its version when anything in it changed (an editor's text, a proposal's status, or, noticed on first
use after a deploy, the capability's declaration), so ``schema_id`` (``<scenario>_v<version>``) names one content.
Reading a template, or checking a payload, reads the cache (:func:`current`). (During a rolling deploy in which
two versions of a capability's declaration serve at once, each switch is a new version: deploy them one after the
other.)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import transaction
from django.db.models import Exists, OuterRef

from ..concierge import errors
from ..concierge.invocation import validator
from ..concierge.validation import MAX_PROBLEMS, named
from ..conf import app_settings
from ..models import ProposedField, SchemaKeyText, SchemaTemplate
from ..models.schema_templates import language_tag
from ..registry import Capability, capability_registry

OTHER = "other"
MAX_OTHER_CHARS = 1000
PENDING_DESCRIPTION = (
    "A key the site is considering, because agents often put the same kind of request in 'other'. It is not "
    "accepted yet: keep sending it in 'other'. Once editors approve it, the template's next version names it."
)
SCHEMA_ID = re.compile(r"(?P<scenario>[A-Za-z0-9_.-]{1,64})_v(?P<version>[1-9][0-9]{0,8})")
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")
OTHER_DESCRIPTION = (
    "Escape valve for what the user asked that no other key can hold, in a few plain words (at most 1000 "
    "characters). The site reads it to improve this template and never acts on it. Example mapping: 'and please "
    "call me before' -> 'call before'."
)
FORMATS = {
    "date": "a date, ISO 8601 (YYYY-MM-DD)",
    "date-time": "a date and time, ISO 8601 with its UTC offset (2026-05-04T09:00:00+02:00)",
    "time": "a time of day, HH:MM",
    "email": "an email address",
    "uri": "an absolute URL",
}
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


# --- keys from the input schema -----------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "string")


def key_type(spec: dict[str, Any]) -> str:
    """The JSON type a property's values have: its ``type`` (the first one other than null, for a union), else
    the type of its ``enum`` or ``const`` values, else string; number where integers and fractions mix."""
    declared = spec.get("type")
    if isinstance(declared, list):
        kinds = [t for t in declared if t != "null"]
        declared = "number" if {"integer", "number"} <= set(kinds) else next(iter(kinds), None)
    if declared is None:
        values = spec.get("enum") or ([spec["const"]] if "const" in spec else [])
        kinds = {json_type(value) for value in values if value is not None}
        if kinds == {"integer", "number"}:  # 0.5, 1, 2: every integer is a number too
            kinds = {"number"}
        declared = kinds.pop() if len(kinds) == 1 else "string"
    return declared if declared in JSON_TYPES else "string"


def described(name: str, spec: dict[str, Any]) -> str:
    """A property's meaning in words, from its JSON Schema: what the draft's ``semantic_description`` carries."""
    text = str(spec.get("description") or spec.get("title") or name.replace("_", " ").capitalize()).rstrip(".")
    parts = [text + "."]
    if "enum" in spec:
        # Written as the user would say them (an LLM reads this): "Grüntee", not "Gr\u00fcntee".
        values = (json.dumps(value, ensure_ascii=False) for value in spec["enum"])
        parts.append("Acceptable values: " + ", ".join(values) + ".")
    if spec.get("format") in FORMATS:
        parts.append(f"Format: {FORMATS[spec['format']]}.")
    elif "pattern" in spec:
        parts.append(f"Must match the regular expression {spec['pattern']}.")
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is not None and high is not None:
        parts.append(f"Range: {low} to {high}.")
    elif low is not None:
        parts.append(f"At least {low}.")
    elif high is not None:
        parts.append(f"At most {high}.")
    # Every bound the schema checks is said: a value refused for one the agent was not told of is a 400 it could
    # not have avoided (draft-07's exclusive bounds are numbers; draft-04's booleans are left to minimum/maximum).
    for bound, words in (("exclusiveMinimum", "More than"), ("exclusiveMaximum", "Less than")):
        if isinstance(spec.get(bound), int | float) and not isinstance(spec[bound], bool):
            parts.append(f"{words} {spec[bound]}.")
    shortest, longest = spec.get("minLength"), spec.get("maxLength")
    if shortest and longest is not None:
        parts.append(f"Between {shortest} and {longest} characters.")
    elif shortest:
        parts.append(f"At least {shortest} characters.")
    elif longest is not None:
        parts.append(f"At most {longest} characters.")
    items = spec.get("items")
    if key_type(spec) == "array" and isinstance(items, dict):
        if key_type(items) == "object" and isinstance(items.get("properties"), dict):
            inner = ", ".join(f"{k} ({key_type(v)})" for k, v in items["properties"].items() if isinstance(v, dict))
            parts.append(f"A list of objects with the keys {inner}.")
        else:
            parts.append(f"A list of {key_type(items)} values.")
        if "minItems" in spec or "maxItems" in spec:
            parts.append(f"Between {spec.get('minItems', 0)} and {spec.get('maxItems', 'any number of')} items.")
    return " ".join(parts)


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


#: How templates are written from a declaration; raised when that changes, so a deploy republishes what was
#: published before (the version goes up only where the content changed). 2: allowed values written unescaped;
#: 3: translations' language tags kept as they are looked up; 4: allowed integers and fractions are a number;
#: 5: exclusive bounds and minimum lengths described; 6: a text in the site's own language is a default text.
BUILD = 6


def source_digest(capability: Capability) -> str:
    """What the template takes from the capability's declaration, and how it is written (:data:`BUILD`), as a
    digest (a deploy that changes either)."""
    declared = [capability.description, capability.input_schema, capability.output_schema, BUILD]
    return hashlib.sha256(json.dumps(declared, sort_keys=True, default=str).encode()).hexdigest()


def build(capability: Capability, texts: list[SchemaKeyText], proposals: list[ProposedField]) -> dict[str, Any]:
    """What :class:`SchemaTemplate` publishes: the keys with their default-language descriptions, the editors'
    translations by language, and the capability's description and output schema."""
    schema = capability.input_schema or {}
    required = set(schema.get("required", []))
    # A text stored under the site's own language (before the form refused it) is a default text too, so that an
    # agent reads the same text whether or not it named that language; of two, the one edited last.
    site_language = language_tag(settings.LANGUAGE_CODE)
    edited = {text.key_name: text.semantic_description
              for text in texts if language_tag(text.language or "") in ("", site_language)}  # fmt: skip
    keys = []
    for name, spec in schema.get("properties", {}).items():
        if not isinstance(spec, dict) or name == OTHER:
            continue
        keys.append(
            {
                "key_name": name,
                "key_type": key_type(spec),
                "required": name in required,
                "default_value": spec.get("default"),
                "semantic_description": edited.get(name) or described(name, spec),
            }
        )
    declared = {key["key_name"] for key in keys}
    for proposal in proposals:
        if proposal.name in declared or proposal.status not in ProposedField.PUBLISHED:
            continue  # once the site declares the key itself, the declaration wins
        keys.append(
            {
                "key_name": proposal.name,
                "key_type": proposal.value_type,
                "required": False,
                "default_value": None,
                "semantic_description": edited.get(proposal.name) or proposal.description,
                "lifecycle": proposal.status,
            }
        )
    keys.append(
        {
            "key_name": OTHER,
            "key_type": "string",
            "required": False,
            "default_value": None,
            "semantic_description": edited.get(OTHER) or OTHER_DESCRIPTION,
        }
    )
    translations: dict[str, dict[str, str]] = {}
    for text in texts:
        language = language_tag(text.language or "")  # as language_of reads a request's tag: "pt_BR" is pt-br
        if language and language != site_language:
            translations.setdefault(language, {})[text.key_name] = text.semantic_description
    return {
        "description": capability.description,
        "keys": keys,
        "translations": dict(sorted(translations.items())),
        "response_schema": capability.output_schema,
    }


def digest_of(published: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(published, sort_keys=True, default=str).encode()).hexdigest()


def publish(capability: Capability) -> SchemaTemplate:
    """Rebuild ``capability``'s template; a different content gets the next version."""
    with transaction.atomic():
        row, _ = SchemaTemplate.objects.get_or_create(scenario=capability.name)
        row = SchemaTemplate.objects.select_for_update().get(pk=row.pk)
        # Oldest edit first: should two texts share a key and language (rows QuerySet.update or bulk_create stored
        # un-normalised), the one edited last is published, not whichever the database returns last.
        texts = list(row.texts.order_by("updated_at", "pk"))
        proposals = list(ProposedField.objects.filter(capability=capability.name, status__in=ProposedField.PUBLISHED))
        published = build(capability, texts, proposals)
        digest = digest_of(published)
        changed = digest != row.digest
        if changed or row.source_digest != source_digest(capability):
            if changed and row.digest:
                row.version += 1
            row.published, row.digest, row.source_digest = published, digest, source_digest(capability)
            row.save()
    transaction.on_commit(partial(forget, capability.name))
    forget(capability.name)
    return row


def cache_key(scenario_name: str) -> str:
    return f"agent_handshake:schema_template:{scenario_name}"


def forget(scenario_name: str) -> None:
    """Drop the cached copy of a scenario's template (:func:`current`)."""
    caches[app_settings.CACHE_ALIAS].delete(cache_key(scenario_name))


def current(capability: Capability, at_least: int = 0) -> SchemaTemplate:
    """The published template, rebuilt first if the capability's declaration changed since, or if a change to its
    texts or proposals marked it stale (:mod:`.receivers`). ``row.proposals_pending`` says whether keys proposed
    for it await an editor.

    It is kept in the ``CACHE_ALIAS`` cache for ``STATE_TTL`` seconds, as the site's state is (a read costs no
    query; a publish and a change drop it, in every process when the cache is shared, within ``STATE_TTL`` with a
    per-process cache); a payload naming a version newer than the copy (``at_least``) reads the database."""
    cache = caches[app_settings.CACHE_ALIAS]
    row = cache.get(cache_key(capability.name))
    if row is not None and row.source_digest == source_digest(capability) and row.version >= at_least:
        return row
    pending = ProposedField.objects.filter(capability=OuterRef("scenario"), status=ProposedField.Status.PENDING)
    row = SchemaTemplate.objects.filter(scenario=capability.name).annotate(proposals_pending=Exists(pending)).first()
    if row is None or row.source_digest != source_digest(capability) or not row.published:
        row = publish(capability)
        row.proposals_pending = ProposedField.objects.filter(
            capability=capability.name, status=ProposedField.Status.PENDING
        ).exists()
    cache.set(cache_key(capability.name), row, app_settings.STATE_TTL)
    return row


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


#: At most this many pending proposals are suggested in a result: every answer of the scenario carries them until
#: an editor decides, and proposals can pile up meanwhile.
MAX_SUGGESTED = 5


def suggested(scenario_name: str) -> list[ProposedField]:
    """The pending proposals a result suggests: the best supported (distinct senders, then texts), a few."""
    pending = ProposedField.objects.filter(capability=scenario_name, status=ProposedField.Status.PENDING)
    return list(pending.order_by("-sources", "-fragments", "pk").only("pk", "value_type")[:MAX_SUGGESTED])


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
