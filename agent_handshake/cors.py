"""CORS preflights for what the app serves to pages in browsers: the public documents (``agent.json``,
``llms.txt``..., the RFC 9728 metadata: any origin) and ``/mcp`` (the origins ``MCP_ALLOWED_ORIGINS`` allows).

Outside the layers of ARCHITECTURE.md (like ``conf.py``), so the discovery views and the MCP door share it.
"""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponseBase

#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: How long a browser may keep a preflight's answer, in seconds.
PREFLIGHT_MAX_AGE = 600


def is_preflight(request: HttpRequest) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def answer_preflight(request: HttpRequest, response: HttpResponseBase, *, origin: str, methods: str) -> None:
    """Let ``origin`` send ``methods`` with the headers the preflight asked for (those that are header names): the
    origin is one the caller trusts, or any (``"*"``) for a public document, which no credentials read."""
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Allow-Methods"] = methods
    asked = [name.strip() for name in request.headers.get("Access-Control-Request-Headers", "").split(",")]
    if names := [name for name in asked if HEADER_NAME.fullmatch(name)]:
        response.headers["Access-Control-Allow-Headers"] = ", ".join(names)
    response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
