"""Async callbacks' protection against server-side request forgery (W005).

A callback URL is chosen by the agent, so a delivery goes only to public addresses, and outside ``DEBUG`` only over
HTTPS (AHP §13). ``CALLBACK_ALLOWED_NETWORKS`` and ``CALLBACK_REQUIRE_HTTPS = False`` lift that for test suites,
whose callback receivers listen on 127.0.0.1. Left in production settings, the first lets any agent make the site
call the networks listed, and the second sends callbacks in plain HTTP. Under ``DEBUG`` (a development site) this
check says nothing.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register

from ..conf import app_settings


@register(Tags.security)
def check_callbacks(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    if settings.DEBUG:
        return []
    problems = []
    if app_settings.CALLBACK_ALLOWED_NETWORKS:
        problems.append(f"CALLBACK_ALLOWED_NETWORKS lets callbacks reach {app_settings.CALLBACK_ALLOWED_NETWORKS}")
    if app_settings.CALLBACK_REQUIRE_HTTPS is False:
        problems.append("CALLBACK_REQUIRE_HTTPS is False")
    if not problems:
        return []
    return [
        Warning(
            "Async callbacks are less protected than they should be outside DEBUG: " + "; ".join(problems) + ".",
            hint="These settings exist for test suites; remove them in production (SSRF, AHP §13).",
            id="agent_handshake.W005",
        )
    ]
