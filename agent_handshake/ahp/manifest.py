"""The AHP manifest (§4), built from the registries, the site profile, the content signals and the settings."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.urls import NoReverseMatch, reverse

from ..concierge.limits import tier_rate
from ..conf import app_settings
from ..identity.site_key import rotated_site_keys, site_did, site_public_key
from ..identity.trust import ACCEPTED, REFUSED, tiers
from ..registry import (
    AHP_VERSION,
    INTENTWEB_ATTRIBUTION_PROFILE,
    INTENTWEB_VERSION,
    MCP_VERSIONS,
    OPENAPI_VERSION,
    SCHEMA_TEMPLATES_SPEC,
    capability_registry,
)
from ..state import Snapshot

MODES = ("MODE1", "MODE2", "MODE3")
#: The request tiers AHP 0.1 knows (verified agents' trust tiers are our extension beside them).
TIERS = ("unauthenticated", "authenticated")
logger = logging.getLogger(__name__)


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` code points, ending in "…" when cut: the schema's ``maxLength`` counts code
    points, and Django's ``Truncator`` counts no combining marks (Arabic harakat, Thai tone marks, Hebrew points),
    so it left such text longer than the limit."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def converse_path() -> str | None:
    """The converse endpoint's path, once a later part of the app has routed it."""
    try:
        return reverse("agent_handshake:converse")
    except NoReverseMatch:
        return None


def _path(name: str) -> str | None:
    try:
        return reverse(f"agent_handshake:{name}")
    except NoReverseMatch:
        return None


def integrations() -> dict[str, Any]:
    """§4.4: the MCP server and the OpenAPI document, once they are routed (both come with the app's URLs), and
    our other front doors for capabilities: IntentWeb and schema templates."""
    found: dict[str, Any] = {}
    if mcp := _path("mcp"):
        # Appendix D's revision first (what an AHP client speaks); every revision we answer after it.
        found["mcp"] = {"url": mcp, "version": MCP_VERSIONS[0], "versions": list(MCP_VERSIONS)}
    if openapi := _path("openapi"):
        found["openapi"] = {"url": openapi, "version": OPENAPI_VERSION}
    if (intent := _path("intent")) and (intent_manifest := _path("intent_manifest")) and offers_intents():
        found["intentweb"] = {
            "manifest": intent_manifest,
            "url": intent,
            "version": INTENTWEB_VERSION,
            "attribution_profile": INTENTWEB_ATTRIBUTION_PROFILE,
        }
        try:
            found["intentweb"]["public_key"] = site_public_key()
        except ImproperlyConfigured:
            logger.exception("The site key cannot be loaded: the manifest publishes no public key")
    if (templates := _path("schema_templates")) and offers_intents():
        found["schema_templates"] = {"url": templates, "spec": SCHEMA_TEMPLATES_SPEC}
    if handshake := _path("handshake"):
        found["agent_identity"] = agent_identity(handshake)
    return found


def agent_identity(handshake: str) -> dict[str, Any]:
    """Verified agent identity (our extension, README "Verified agents"): the site's DID and key, the handshake,
    and the DIDs of keys the site rotated away from."""
    identity: dict[str, Any] = {
        "protocol": "agent-semantic-protocol/0.1",
        "handshake": handshake,
        "verify": _path("handshake_verify"),
        "protobuf": _path("asp"),
        "authentication": "did_session",
        "credential": "Authorization: Bearer <access_token>",
    }
    try:
        identity["did"], identity["public_key"] = site_did(), site_public_key()
    except ImproperlyConfigured:
        logger.exception("The site key cannot be loaded: the manifest publishes no DID")
        return identity
    identity["rotated"] = [
        {"did": record.did, "public_key": record.public_key, "rotated_at": record.rotated_at.isoformat()}
        for record in rotated_site_keys()
    ]
    return identity


def verified_agent_tiers() -> dict[str, Any]:
    return {
        "trust": {"initial": 0.5, "accepted": ACCEPTED, "refused": REFUSED},
        "tiers": [
            {
                "name": tier.name,
                "min_trust": tier.min_trust,
                "requests": tier_rate(tier.rate_limits),
                "scopes": list(tier.scopes),
            }
            for tier in tiers()
        ],
    }


def offers_intents() -> bool:
    return any(c.mode == "MODE3" and c.handler is not None for c in capability_registry.available())


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
        "name": cut(snapshot.name, 128),
        "description": cut(snapshot.description, 512),
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
    # Both tiers, each with the request rate enforced: a tier RATE_LIMITS leaves out, or gives no ``requests``, is
    # still counted against its default, which an agent must be told as much as a rate the site set.
    manifest["rate_limits"] = {tier: {**rate_limits.get(tier, {}), "requests": tier_rate(tier)} for tier in TIERS}
    manifest["rate_limit"] = manifest["rate_limits"]["unauthenticated"]["requests"]
    if _path("handshake"):  # verified agents' tiers (our extension; the 0.1 schema knows two tiers: NOTES.md)
        manifest["rate_limits"] = {**manifest.get("rate_limits", {}), "verified_agents": verified_agent_tiers()}
    if modes & {"MODE2", "MODE3"}:  # the same capabilities over NLWeb v0.54
        manifest["links"]["nlweb_ask"] = base_url + reverse("agent_handshake:nlweb_ask")
        manifest["links"]["nlweb_await"] = base_url + reverse("agent_handshake:nlweb_await")
    if modes & {"MODE2", "MODE3"} and (found := integrations()):
        manifest["integrations"] = found  # the spec's newer text (§4.4); the 0.1 schema lacks it (NOTES.md)
    if app_settings.SERVE_ROBOTS_TXT:
        manifest["links"]["robots_txt"] = base_url + reverse("agent_handshake:robots_txt")
    if not manifest["name"]:
        del manifest["name"]
    if not manifest["description"]:
        del manifest["description"]
    return manifest
