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
#: The agent-facing headers on what the app serves (the middleware's ``Link`` to the manifest, ``Content-Signal``),
#: which a page on another origin reads only when a response exposes them: a browser shows it the CORS-safelisted
#: ones alone (``Cache-Control``, ``Content-Type``, ``Last-Modified``...).
AGENT_HEADERS = ("Content-Signal", "Link")
#: What a public document exposes: its validator too, for the page's ``If-None-Match``.
DOCUMENT_HEADERS = ("ETag", *AGENT_HEADERS)


def is_preflight(request: HttpRequest) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def share_publicly(response: HttpResponseBase) -> None:
    """Let a page on any origin read a public document (no credentials read it) and its :data:`DOCUMENT_HEADERS`."""
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Access-Control-Expose-Headers"] = ", ".join(DOCUMENT_HEADERS)


def answer_preflight(request: HttpRequest, response: HttpResponseBase, *, origin: str, methods: str) -> None:
    """Let ``origin`` send ``methods`` with the headers the preflight asked for (those that are header names): the
    origin is one the caller trusts, or any (``"*"``) for a public document, which no credentials read."""
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Allow-Methods"] = methods
    asked = [name.strip() for name in request.headers.get("Access-Control-Request-Headers", "").split(",")]
    if names := [name for name in asked if HEADER_NAME.fullmatch(name)]:
        response.headers["Access-Control-Allow-Headers"] = ", ".join(names)
    response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
