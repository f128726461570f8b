"""Verified agent identity, reviewed: what a visiting agent (or an operator) hit at the handshake, the session
credential, trust and the site key that the other test files did not reach.

The agents here are those of ``tests/test_verified_agents.py`` and ``tests/test_asp.py``, written from the spec and
the README's signed bytes."""

from __future__ import annotations

import pytest
from django.test import Client

from agent_handshake.models import TrustEvent, VerifiedAgent
from tests.test_verified_agents import Agent

pytestmark = pytest.mark.django_db


def test_a_verified_agents_request_for_a_path_with_a_nul_is_answered_and_moves_its_trust(demo_content):
    """The trust history's reason names the request's path, which may hold a NUL (``%00``) that no text column
    can: the agent got a 500 (a DataError while recording its trust) instead of the front door's 404."""
    client = Client(raise_request_exception=False)
    agent = Agent(client)
    agent.handshake()
    response = client.get("/schema-templates/book%00ing", **agent.headers)
    assert response.status_code == 404, response.content[:300]
    assert response["Content-Type"] == "application/json"
    event = TrustEvent.objects.get(agent=VerifiedAgent.objects.get(did=agent.did))
    assert event.delta == pytest.approx(-0.02)
    assert "\x00" not in event.reason
    assert event.reason == "GET /schema-templates/book\ufffding -> 404"


def test_two_rotations_in_the_same_second_keep_both_old_keys(db, tmp_path, settings):
    """``--rotate`` keeps the old key file beside the new one (``.rotated-<time>``); a second rotation within the
    same second replaced the first one's kept file, so a key the manifests still announce was lost."""
    from io import StringIO

    from cryptography.hazmat.primitives import serialization
    from django.core.management import call_command
    from django.test import override_settings

    path = tmp_path / "site.pem"
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(path)}):
        call_command("agent_site_key", stdout=StringIO())
        keys = [path.read_bytes()]
        for _ in range(3):  # milliseconds apart: at least two share a second
            call_command("agent_site_key", "--rotate", stdout=StringIO())
            keys.append(path.read_bytes())
    kept = sorted(tmp_path.glob("site.pem.rotated-*"))
    assert len(kept) == 3
    assert {file.read_bytes() for file in kept} == set(keys[:3])
    for file in kept:  # each is still a readable key, mode 0600 like the original
        serialization.load_pem_private_key(file.read_bytes(), password=None)
        assert file.stat().st_mode & 0o777 == 0o600
