"""Schema templates, published: a MODE3 capability's input as typed keys with semantic descriptions, built from
what the site declares and its editors write, versioned, and kept up to date.

A capability is a *scenario*; its template is built from what the site already declares, never declared again
(:func:`build`):

- one key per ``input_schema`` property: ``key_type`` its JSON type, ``required`` from the schema, ``default_value``
  its ``default``, and a ``semantic_description`` written from its description, allowed values, format, pattern
  and bounds (:func:`described`), unless an editor wrote one (``SchemaKeyText`` in the admin, per language);
- the proposed keys editors approved (``ProposedField``, ``experimental`` then ``stable``), marked with
  ``lifecycle``;
- the reserved :data:`OTHER` key, last, in every template.

The template is published in a :class:`~agent_handshake.models.SchemaTemplate` row: :func:`publish` rebuilds it and
raises its version when anything in it changed (an editor's text, a proposal's status, or, noticed on first use
after a deploy, the capability's declaration), so a version names one content. Reading a template reads the cache
(:func:`current`). When an editor's key text or a proposed key changes, the template is marked stale in the same
transaction (so the next read rebuilds it whatever happens after), and published again once the change commits
(:func:`connect`); a proposal's counters do not make a new version. The schema templates front door
(:mod:`agent_handshake.schema_templates`) renders the published template and checks payloads against it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.signals import post_delete, post_save

from ..conf import app_settings
from ..models import ProposedField, SchemaKeyText, SchemaTemplate
from ..models.schema_templates import language_tag
from ..registry import Capability, capability_registry

__all__ = [
    "BUILD",
    "OTHER",
    "build",
    "connect",
    "current",
    "described",
    "digest_of",
    "forget",
    "key_type",
    "language_tag",
    "publish",
    "source_digest",
    "suggested",
]

logger = logging.getLogger(__name__)

#: The reserved key of every template, for what the user asked that no other key can hold.
OTHER = "other"
OTHER_DESCRIPTION = (
    "Escape valve for what the user asked that no other key can hold, in a few plain words (at most 1000 "
    "characters). The site reads it to improve this template and never acts on it. Example mapping: 'and please "
    "call me before' -> 'call before'."
)
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")
FORMATS = {
    "date": "a date, ISO 8601 (YYYY-MM-DD)",
    "date-time": "a date and time, ISO 8601 with its UTC offset (2026-05-04T09:00:00+02:00)",
    "time": "a time of day, HH:MM",
    "email": "an email address",
    "uri": "an absolute URL",
}


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
    texts or proposals marked it stale (:func:`connect`). ``row.proposals_pending`` says whether keys proposed
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


#: At most this many pending proposals are suggested in a result: every answer of the scenario carries them until
#: an editor decides, and proposals can pile up meanwhile.
MAX_SUGGESTED = 5


def suggested(scenario_name: str) -> list[ProposedField]:
    """The pending proposals a result suggests: the best supported (distinct senders, then texts), a few."""
    pending = ProposedField.objects.filter(capability=scenario_name, status=ProposedField.Status.PENDING)
    return list(pending.order_by("-sources", "-fragments", "pk").only("pk", "value_type")[:MAX_SUGGESTED])


# --- published again when what it is made of changes -------------------------------------------------------------

#: Fields of a proposal the pool and the counters write; they are not part of any template.
BOOKKEEPING = frozenset({"centroid", "fragments", "sources", "examples", "filled", "failures", "updated_at"})


def republish(capability_name: str) -> None:
    capability = capability_registry.get(capability_name)
    if capability is None or capability.input_schema is None:
        return
    try:
        publish(capability)
    except Exception:  # the row is marked stale: the next read publishes it
        logger.exception("Could not publish the schema template of %s", capability_name)


def changed(scenario: str) -> None:
    SchemaTemplate.objects.filter(scenario=scenario).update(source_digest="")
    forget(scenario)
    transaction.on_commit(partial(forget, scenario))
    transaction.on_commit(partial(republish, scenario))


def text_changed(sender: type, instance: SchemaKeyText, **kwargs: Any) -> None:
    scenario = SchemaTemplate.objects.filter(pk=instance.template_id).values_list("scenario", flat=True).first()
    if scenario is not None:
        changed(scenario)


def proposal_changed(sender: type, instance: ProposedField, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and set(update_fields) <= BOOKKEEPING:
        return
    changed(instance.capability)


def connect() -> None:
    """Mark a template stale, and publish it again, when an editor's key text or a proposed key of it changes."""
    for event, signal in (("saved", post_save), ("deleted", post_delete)):
        signal.connect(text_changed, sender=SchemaKeyText, dispatch_uid=f"agent_handshake.key_text_{event}")
        signal.connect(proposal_changed, sender=ProposedField, dispatch_uid=f"agent_handshake.proposal_{event}")
