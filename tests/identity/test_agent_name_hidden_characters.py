"""A verified agent's self-declared ``agent_id`` and ``capabilities`` are what operators read (``VerifiedAgent.__str__``
is its name in the admin's titles and breadcrumbs): stored without control or format characters, as the insights
store an anonymous agent's name (a U+202E before "moc.elgoog" showed "google.com")."""

from __future__ import annotations

import pytest

from agent_handshake.models import VerifiedAgent
from tests.identity.test_verified_agents import Agent

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


class JoinedWordsAgent(Agent):
    def hello(self, **changes) -> dict:
        # Persian with a ZWNJ inside its first word; a Devanagari half form.
        declared = {
            "agent_id": "\u0631\u0628\u0627\u062a\u200c\u0686\u0627\u06cc Tea\u200dFinder",
            "capabilities": ["\U0001f469\u200d\U0001f4bb", "\u0915\u094d\u200d\u0937", "shop\u200cping", "\u200c"],
        }
        return super().hello(**{**declared, **changes})


def test_a_verified_agents_name_and_capabilities_keep_the_joiners_their_words_need(client):
    """A ZWNJ inside a Persian word, a ZWJ in a Devanagari half form or in an emoji sequence is part of what shows:
    kept. Between ASCII letters, or alone, it only hides: removed."""
    agent = JoinedWordsAgent(client)
    agent.handshake()
    stored = VerifiedAgent.objects.get(did=agent.did)
    assert stored.agent_id == "\u0631\u0628\u0627\u062a\u200c\u0686\u0627\u06cc TeaFinder"
    assert stored.capabilities == ["\U0001f469\u200d\U0001f4bb", "\u0915\u094d\u200d\u0937", "shopping"]
