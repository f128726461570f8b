"""The intent page's (/intent-ui/) Content-Security-Policy runs its own script and no other inline one: the script
carries a nonce, new with every response, that the policy names. With ``'unsafe-inline'`` in ``script-src`` (the
page's script was inline and unmarked), a script injected into the page ran as well as the page's own."""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def script_policy(header: str) -> str:
    directives = dict(part.strip().split(" ", 1) for part in header.split(";") if part.strip())
    return directives["script-src"]


def test_the_intent_page_runs_only_its_own_inline_script_by_a_nonce_new_with_every_response(demo_content):
    nonces = []
    for _ in range(2):
        page = Client().get("/intent-ui/")
        assert page.status_code == 200
        scripts = script_policy(page.headers["Content-Security-Policy"])
        assert "'unsafe-inline'" not in scripts, scripts
        (nonce,) = re.findall(r"'nonce-([A-Za-z0-9+/_=-]+)'", scripts)
        assert len(nonce) >= 22, nonce  # 128 bits or more, as CSP asks
        body = page.content.decode()
        # Every script the browser runs (not the capabilities' JSON data block) carries the header's nonce.
        runnable = re.findall(r"<script(?![^>]*type=\"application/json\")([^>]*)>", body)
        assert runnable, body
        assert all(f'nonce="{nonce}"' in attributes for attributes in runnable), runnable
        nonces.append(nonce)
    assert nonces[0] != nonces[1]


def test_the_api_reference_runs_only_its_own_inline_script_by_a_nonce_new_with_every_response(client):
    """The Swagger UI page (/agent/api-docs/) had the same ``'unsafe-inline'`` for its one inline script (the one
    starting Swagger UI over /openapi.json); its bundles are the site's own files (``'self'``)."""
    nonces = []
    with override_settings(AGENT_HANDSHAKE={"API_DOCS": True}):
        for _ in range(2):
            page = client.get("/agent/api-docs/")
            assert page.status_code == 200
            scripts = script_policy(page.headers["Content-Security-Policy"])
            assert "'unsafe-inline'" not in scripts, scripts
            (nonce,) = re.findall(r"'nonce-([A-Za-z0-9+/_=-]+)'", scripts)
            inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", page.content.decode())
            assert inline, page.content
            assert all(f'nonce="{nonce}"' in attributes for attributes in inline), inline
            nonces.append(nonce)
    assert nonces[0] != nonces[1]
