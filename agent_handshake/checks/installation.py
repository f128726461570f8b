"""What a site adds to its own settings and URLconf to install the app: the discovery middleware, below
``GZipMiddleware`` (W002, W003), and ``agent_handshake.urls`` (W004).

Either one missing leaves the site working for people and silent for agents (no ``Link`` header, no
``/.well-known/agent.json``), which no error would ever show; hence warnings here.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.urls import NoReverseMatch, reverse

MIDDLEWARE_PATH = "agent_handshake.middleware.AgentDiscoveryMiddleware"
GZIP_PATH = "django.middleware.gzip.GZipMiddleware"


@register(Tags.compatibility)
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    middleware = list(getattr(settings, "MIDDLEWARE", None) or [])
    if MIDDLEWARE_PATH not in middleware:
        return [
            Warning(
                "The agent discovery middleware is not installed: pages get no Link header, no <link> tag and "
                "no agent notice.",
                hint=f"Add {MIDDLEWARE_PATH!r} to MIDDLEWARE.",
                id="agent_handshake.W002",
            )
        ]
    if GZIP_PATH in middleware and middleware.index(MIDDLEWARE_PATH) < middleware.index(GZIP_PATH):
        return [
            Warning(
                "The agent discovery middleware comes before GZipMiddleware, so it sees compressed bodies and "
                "has to decompress them to add the notice.",
                hint=f"Move {MIDDLEWARE_PATH!r} below {GZIP_PATH!r}.",
                id="agent_handshake.W003",
            )
        ]
    return []


@register(Tags.urls)
def check_urls(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    try:
        reverse("agent_handshake:manifest")
    except NoReverseMatch:
        return [
            Warning(
                "agent_handshake.urls is not included, so /.well-known/agent.json is not served.",
                hint='Add path("", include("agent_handshake.urls")) to the root URLconf.',
                id="agent_handshake.W004",
            )
        ]
    return []
