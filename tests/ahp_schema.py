"""Validation against the published AHP schemas, with the one manifest deviation NOTES.md names."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema


def assert_valid_manifest(manifest: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Valid against manifest.json once the newer spec text's ``auth_required`` (a capability that needs
    credentials) and ``integrations`` (§4.4: MCP, OpenAPI; ours: IntentWeb, schema templates, agent identity)
    are set aside, with ``rate_limits.verified_agents`` (the issue that added verified agents asks for their tiers
    there): the 0.1 schema forbids unknown keys. ``auth_required`` itself must be ``True``."""
    stripped = copy.deepcopy(manifest)
    stripped.pop("integrations", None)
    stripped.get("rate_limits", {}).pop("verified_agents", None)  # trust tiers (README "Verified agents")
    for capability in stripped.get("capabilities", []):
        if "auth_required" in capability:
            assert capability.pop("auth_required") is True
    jsonschema.Draft7Validator(schemas["manifest"]).validate(stripped)


def assert_valid_request(body: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Valid against request.json once the project's additions are set aside: a request may leave ``capability``
    out (the query is then routed) and its ``context`` may carry ``intent_vector``, ``input`` and ``filters``
    (the 0.1 schema requires the one and forbids the others; tests/discovery/test_manifest.py names the deviation)."""
    stripped = copy.deepcopy(body)
    stripped.setdefault("capability", "content_search")
    for key in ("intent_vector", "input", "filters"):
        stripped.get("context", {}).pop(key, None)
    jsonschema.Draft7Validator(schemas["request"]).validate(stripped)
