"""The registered capabilities: unique names (E007), a declaration every front door can publish and run (E008), no
``action``/``async`` capability open to anonymous agents (E009), no input property named like the key schema
templates keep for free text (W006), and no capability of the app's replaced by accident (W007).

A capability is published in every protocol's manifest and invoked by agents, not by the site's own pages: a
declaration the doors cannot read fails in front of an agent, or, for an action without authentication, succeeds
for anyone. Each E008 problem is found by one function of :data:`DECLARATION_CHECKS`, and all of a capability's
problems are reported in one message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jsonschema
from django.core.checks import Error, Tags, Warning, register

from ..concierge.capabilities import PLAIN_TYPES
from ..conf import app_settings
from ..content_types import TYPE_PATTERN
from ..registry import ACTION_TYPES, MODES, Capability, capability_registry, content_registry
from ..schema_templates.templates import OTHER  # the free-text key schema templates reserve
from .setting_values import RATE

CAPABILITY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@register(Tags.compatibility)
def check_capabilities(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = _duplicate_errors()
    app_capabilities = _app_capabilities()
    for capability in capability_registry:
        errors += _declaration_errors(capability)
        errors += _authentication_errors(capability)
        errors += _reserved_input_warnings(capability)
        errors += _replacement_warnings(capability, app_capabilities)
    return errors


def _duplicate_errors() -> list[Error]:
    return [
        Error(
            f"Two capabilities are named {capability.name!r}.",
            hint="Capability names are unique across the site.",
            id="agent_handshake.E007",
        )
        for capability in capability_registry.duplicates
    ]


def _name_problems(capability: Capability) -> list[str]:
    if CAPABILITY_NAME.match(capability.name) and len(capability.name) <= 64:
        return []
    return ["its name must match ^[a-z][a-z0-9_]*$ (at most 64 characters)"]


def _mode_problems(capability: Capability) -> list[str]:
    if capability.mode in MODES:
        return []
    return [f"its mode must be one of {', '.join(MODES)}"]


def _action_type_problems(capability: Capability) -> list[str]:
    if capability.action_type is None or capability.action_type in ACTION_TYPES:
        return []
    return [f"its action_type must be one of {', '.join(ACTION_TYPES)}"]


def _mode3_problems(capability: Capability) -> list[str]:
    if capability.mode != "MODE3":
        return []
    if any(part is None for part in (capability.action_type, capability.input_schema, capability.output_schema)):
        return ["MODE3 capabilities need action_type, input_schema and output_schema (AHP §5.3)"]
    return []


def _response_type_problems(capability: Capability) -> list[str]:
    bad_types = [t for t in capability.response_types if not TYPE_PATTERN.match(t)]
    if capability.response_types and not bad_types:
        return []
    return ["its response_types must be a non-empty list of AHP content types"]


def _schema_problems(capability: Capability) -> list[str]:
    problems = []
    for label, schema in (("input_schema", capability.input_schema), ("output_schema", capability.output_schema)):
        if schema is not None:
            try:
                jsonschema.Draft7Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                problems.append(f"its {label} is not a valid JSON Schema ({exc.message})")
    return problems


def _input_property_problems(capability: Capability) -> list[str]:
    properties = (capability.input_schema or {}).get("properties") or {}
    if not isinstance(properties, dict) or all(isinstance(spec, dict) for spec in properties.values()):
        return []
    # Valid JSON Schema, but every front door reads a field's description, title and allowed values.
    return ["each of its input_schema's properties must be a schema object (not true or false)"]


def _rate_limit_problems(capability: Capability) -> list[str]:
    if capability.rate_limit is None or RATE.match(str(capability.rate_limit)):
        return []
    return [f'its rate_limit {capability.rate_limit!r} is not "N/period"']


def _content_problems(capability: Capability) -> list[str]:
    """``models`` and ``applies_to`` name registered content (labels such as "blog.post")."""
    registered = {config.label for config in content_registry.configs()}
    problems = []
    for option, labels in (("models", capability.models), ("applies_to", capability.applies_to)):
        unknown = [label for label in labels if label not in registered]
        if unknown:
            # Nothing would be retrieved from them, or no action offered on them, and nothing said why.
            problems.append(
                f"its {option} names {', '.join(map(repr, unknown))}, which is not registered content "
                "(agent_handshake.register)"
            )
    return problems


def _handler_problems(capability: Capability) -> list[str]:
    if capability.action_type is not None and capability.handler is None:
        return ["it has no handler"]
    return []


def _description_problems(capability: Capability) -> list[str]:
    if len(capability.description) > 256:
        return ["its description must be at most 256 characters"]
    return []


#: Each part of a declaration E008 checks, in the order its problems are listed.
DECLARATION_CHECKS: tuple[Callable[[Capability], list[str]], ...] = (
    _name_problems,
    _mode_problems,
    _action_type_problems,
    _mode3_problems,
    _response_type_problems,
    _schema_problems,
    _input_property_problems,
    _rate_limit_problems,
    _content_problems,
    _handler_problems,
    _description_problems,
)


def _declaration_errors(capability: Capability) -> list[Error]:
    """E008: one message listing every problem of the capability's declaration."""
    problems = [problem for check in DECLARATION_CHECKS for problem in check(capability)]
    if not problems:
        return []
    return [Error(f"Capability {capability.name!r} is invalid: {'; '.join(problems)}.", id="agent_handshake.E008")]


def _authentication_errors(capability: Capability) -> list[Error]:
    """E009: an ``action`` or ``async`` capability changes something, so it needs an authenticated caller."""
    if capability.action_type not in ("action", "async"):
        return []
    if app_settings.AUTHENTICATION != "none" and capability.scope and capability.requires_auth:
        return []
    return [
        Error(
            f"Capability {capability.name!r} is an {capability.action_type!r} capability that could be "
            "invoked without authentication.",
            hint="AHP §5.3: leave AGENT_HANDSHAKE['AUTHENTICATION'] unset (or name a scheme other than "
            "'none') and give the capability a scope.",
            id="agent_handshake.E009",
        )
    ]


def _reserved_input_warnings(capability: Capability) -> list[Warning]:
    """W006: an input property named like the free-text key of schema templates."""
    if OTHER not in ((capability.input_schema or {}).get("properties") or {}):
        return []
    return [
        Warning(
            f"Capability {capability.name!r} declares an input property {OTHER!r}, the key every schema "
            "template keeps for free text: its value never reaches the capability from a schema template "
            "(and, if required, every structured submission is refused).",
            hint="Rename the property.",
            id="agent_handshake.W006",
        )
    ]


def _app_capabilities() -> dict[str, str]:
    """The names of the capabilities the app registers itself (:mod:`agent_handshake.concierge.capabilities`), each
    with what it is."""
    names = {"contact": "the built-in one (the site profile's contact details)"}
    if len(content_registry):
        names["site_info"] = "the built-in one (the site profile and the pages marked site_info)"
        names["content_search"] = "the built-in one (a search of all registered content)"
    for config in content_registry.configs():
        if config.content_type not in PLAIN_TYPES:
            names.setdefault(
                config.get_capability_name(), f"the one generated for {config.label} ({config.content_type})"
            )
    return names


def _replacement_warnings(capability: Capability, app_capabilities: dict[str, str]) -> list[Warning]:
    """W007: a site's capability named like one the app registers takes its place."""
    replaced = app_capabilities.get(capability.name)
    if not replaced or any(capability is own for own in capability_registry.builtin):
        return []
    # That is how a site replaces one, but a name chosen without knowing it was taken loses the app's.
    return [
        Warning(
            f"Capability {capability.name!r} replaces {replaced}.",
            hint="If that is intended, add 'agent_handshake.W007' to SILENCED_SYSTEM_CHECKS; otherwise "
            "rename the capability.",
            id="agent_handshake.W007",
        )
    ]
