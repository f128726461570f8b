"""The AHP manifest (§4), built from the registries, the site profile, the content signals and the settings."""

from __future__ import annotations

from typing import Any

from django.urls import NoReverseMatch, reverse
from django.utils.text import Truncator

from ..conf import app_settings
from ..registry import capability_registry
from ..state import Snapshot

AHP_VERSION = "0.1"
MODES = ("MODE1", "MODE2", "MODE3")


def converse_path() -> str | None:
    """The converse endpoint's path, once a later part of the app has routed it."""
    try:
        return reverse("agent_handshake:converse")
    except NoReverseMatch:
        return None


def build_manifest(snapshot: Snapshot, base_url: str) -> dict[str, Any]:
    """The manifest as a dict; ``base_url`` ("https://example.com") makes the ``links`` absolute."""
    capabilities = capability_registry.available()
    modes = {"MODE1"} | {capability.mode for capability in capabilities}
    endpoints = {"content": reverse("agent_handshake:llms_txt")}
    converse = converse_path()
    if converse and modes & {"MODE2", "MODE3"}:
        endpoints["converse"] = converse
    rate_limits = app_settings.RATE_LIMITS
    manifest: dict[str, Any] = {
        "ahp": AHP_VERSION,
        "name": Truncator(snapshot.name).chars(128) if snapshot.name else "",
        "description": Truncator(snapshot.description).chars(512),
        "modes": [mode for mode in MODES if mode in modes],
        "endpoints": endpoints,
        "capabilities": [capability.manifest_entry() for capability in capabilities],
        "authentication": app_settings.AUTHENTICATION
        or ("bearer" if any(c.requires_auth for c in capabilities) else "none"),
        "content_signals": dict(snapshot.site_signals),
        "async": {"supported": False},
        "links": {
            "llms_txt": base_url + reverse("agent_handshake:llms_txt"),
            "llms_full_txt": base_url + reverse("agent_handshake:llms_full_txt"),
        },
    }
    etas = [c.eta_seconds or app_settings.JOB_ETA_SECONDS for c in capabilities if c.action_type == "async"]
    if etas:
        manifest["async"] = {"supported": True, "max_eta_seconds": max(etas)}
    unauthenticated = rate_limits.get("unauthenticated", {}).get("requests")
    if unauthenticated:
        manifest["rate_limit"] = unauthenticated
    if rate_limits:
        manifest["rate_limits"] = rate_limits
    if modes & {"MODE2", "MODE3"}:  # the same capabilities over NLWeb v0.54
        manifest["links"]["nlweb_ask"] = base_url + reverse("agent_handshake:nlweb_ask")
        manifest["links"]["nlweb_await"] = base_url + reverse("agent_handshake:nlweb_await")
    if app_settings.SERVE_ROBOTS_TXT:
        manifest["links"]["robots_txt"] = base_url + reverse("agent_handshake:robots_txt")
    if not manifest["name"]:
        del manifest["name"]
    if not manifest["description"]:
        del manifest["description"]
    return manifest
