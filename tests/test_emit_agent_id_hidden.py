"""A verified agent's self-declared ``agent_id`` and ``capabilities`` are what operators read (``VerifiedAgent.__str__``
is its name in the admin's titles and breadcrumbs): stored without control or format characters, as the insights
store an anonymous agent's name (a U+202E before "moc.elgoog" showed "google.com")."""

from __future__ import annotations

import pytest

from agent_handshake.models import VerifiedAgent
from tests.test_verified_agents import Agent

pytestmark = pytest.mark.django_db


class HiddenCharactersAgent(Agent):
    def hello(self, **changes) -> dict:
        declared = {
            "agent_id": "\u202emoc.elgoog\u200b \x1b[31mbot",
            "capabilities": ["shop\u200dping", "\u2066a\x07b", "\u200b"],  # the last shows nothing at all
        }
        return super().hello(**{**declared, **changes})


def test_a_verified_agents_declared_name_and_capabilities_are_stored_visible(client):
    agent = HiddenCharactersAgent(client)
    agent.handshake()
    stored = VerifiedAgent.objects.get(did=agent.did)
    assert stored.agent_id == "moc.elgoog [31mbot"
    assert str(stored) == "moc.elgoog [31mbot"
    assert stored.capabilities == ["shopping", "ab"]
