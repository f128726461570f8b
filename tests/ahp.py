"""Validation against the published AHP schemas, with the one manifest deviation NOTES.md names."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema


def assert_valid_manifest(manifest: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Valid against manifest.json once the newer spec text's ``auth_required`` (a capability that needs
    credentials) and ``integrations`` (§4.4: MCP, OpenAPI) are set aside (the 0.1 schema forbids unknown keys);
    ``auth_required`` itself must be ``True``."""
    stripped = copy.deepcopy(manifest)
    stripped.pop("integrations", None)
    for capability in stripped.get("capabilities", []):
        if "auth_required" in capability:
            assert capability.pop("auth_required") is True
    jsonschema.Draft7Validator(schemas["manifest"]).validate(stripped)
