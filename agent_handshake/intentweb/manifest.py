"""``/intentmanifest.yaml`` (IntentWeb §2), generated from the site profile and the capability registry.

One capability entry per MODE3 capability an intent can reach: its ``intent`` and ``description``, its
``examples``, what it ``requires`` in natural language (the ``input_schema``'s required fields, then its optional
ones, each with its description), its ``constraints`` and ``notes`` (with what credentials it needs, and how an
``async`` one answers), and the profile's opening hours on capabilities that book or change something. The
``attribution`` block (our extension) publishes the signing profile, the site's public key and the ``actor_id``
the site signs its chain entries as.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.urls import reverse
from django.utils.functional import Promise

from ..identity.site_key import site_did, site_public_key
from ..registry import INTENTWEB_VERSION, Capability
from ..state import Snapshot
from .attribution import PROFILE
from .flows import offered


def field_text(name: str, spec: dict[str, Any]) -> str:
    text = spec.get("description") or spec.get("title") or name.replace("_", " ").capitalize()
    if "enum" in spec:
        text += " (one of: " + ", ".join(str(option) for option in spec["enum"]) + ")"
    return text


def requires(capability: Capability) -> list[str]:
    schema = capability.input_schema or {}
    properties = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    listed = [f"{field_text(name, properties[name])} [{name}]" for name in required]
    listed += [f"Optionally: {field_text(name, spec)} [{name}]" for name, spec in properties.items()
               if name not in required and isinstance(spec, dict)]  # fmt: skip
    return listed


def entry(capability: Capability, hours: dict[str, str]) -> dict[str, Any]:
    item: dict[str, Any] = {"intent": capability.intent_text, "description": capability.description}
    if capability.examples:
        item["examples"] = list(capability.examples)
    if needed := requires(capability):
        item["requires"] = needed
    if capability.constraints:
        item["constraints"] = list(capability.constraints)
    notes = list(capability.notes)
    if capability.requires_auth:
        scope = f" with the scope {capability.scope!r}" if capability.scope else ""
        notes.append(f"Needs an API key{scope}, sent as Authorization: Bearer <key> with every message.")
    if capability.action_type == "async":
        notes.append("Runs in the background: the site answers status accepted, then reports on each message.")
    if notes:
        item["notes"] = notes
    if hours and capability.action_type in ("action", "async"):
        item["operating_hours"] = dict(hours)
    item["capability"] = capability.name  # ours: the name every other front door uses
    return item


def build(snapshot: Snapshot, base: str) -> dict[str, Any]:
    endpoint = base + reverse("agent_handshake:intent")
    manifest: dict[str, Any] = {
        "manifest_version": INTENTWEB_VERSION,
        "company": snapshot.name,
        "last_updated": snapshot.last_modified.date().isoformat(),
    }
    if snapshot.description:
        manifest["about"] = snapshot.description
    if snapshot.schema_type:
        manifest["schema_type"] = snapshot.schema_type
    if address := snapshot.contact.get("address"):
        manifest["location"] = {"address": " ".join(address.split())}
    if snapshot.hours:
        manifest["operating_hours"] = dict(snapshot.hours)
    manifest["capabilities"] = [entry(capability, snapshot.hours) for capability in offered()]
    contact: dict[str, Any] = {"intent_endpoint": endpoint, "website": base + "/"}
    if phone := snapshot.contact.get("phone"):
        contact["phone"] = phone
    if email := snapshot.contact.get("email"):
        contact["email"] = email
    manifest["contact"] = contact
    manifest["attribution"] = {
        **PROFILE,
        "actor_id": endpoint,
        "public_key": site_public_key(),
        "did": site_did(),
        "agent_keys": "Chain entries are verified against keys the site's operator registered for their actor_id; "
        "others are accepted and reported as unverified.",
    }
    return manifest


class ManifestDumper(yaml.SafeDumper):
    """YAML's safe dumper, with Django's lazy strings (``gettext_lazy``, how an app writes a capability's
    translatable text) as the strings they are: the safe dumper refuses any type it does not know, and the manifest
    was a 500."""


ManifestDumper.add_multi_representer(Promise, lambda dumper, text: dumper.represent_str(str(text)))


def render(snapshot: Snapshot, base: str) -> str:
    return yaml.dump(build(snapshot, base), Dumper=ManifestDumper, sort_keys=False, allow_unicode=True, width=100)
