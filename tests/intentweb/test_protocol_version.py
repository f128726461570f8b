"""The IntentWeb version a client speaks (§3.3: the response's protocol_version is "Same as request"; §10: minor
versions are compatible, major ones not). Real HTTP through the test client, a client written from the spec
(tests/intentweb/test_intentweb.py's Agent, which checks every reply against the upstream schema and the site's
signature)."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785

from agent_handshake.models import IntentNonce, Interaction
from tests.intentweb.test_intentweb import Agent

pytestmark = pytest.mark.django_db


class VersionedAgent(Agent):
    """An agent speaking ``version`` (its query_hash covers it, as the profile says)."""

    def __init__(self, client, version: str, **kwargs):
        super().__init__(client, **kwargs)
        self.version = version

    def envelope(self, flow_type: str, message: str, **extra) -> dict:
        if flow_type == "intent_request" and not self.query_hash:
            initial = {"protocol_version": self.version, "flow_type": flow_type, "message": message,
                       "interaction_id": self.interaction_id}  # fmt: skip
            self.query_hash = hashlib.sha256(rfc8785.dumps(initial)).hexdigest()
        body = super().envelope(flow_type, message, **extra)
        body["protocol_version"] = self.version
        return body


def test_a_minor_version_is_answered_in_the_version_it_was_asked_in(client, demo_content):
    """§3.3: the response's protocol_version is "Same as request"; a later 1.x is compatible with ours (§10). The
    site answered every 1.x message with "1.0"."""
    agent = VersionedAgent(client, "1.2")
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert reply["protocol_version"] == "1.2"
    # A refusal of a 1.x message is in its version too.
    status, reply = agent.send("information_response", "And LK-TEA-0002?")
    assert (status, reply["status"]) == (409, "interaction_closed")
    assert reply["protocol_version"] == "1.2"
    plain = Agent(client)
    status, reply = plain.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["protocol_version"]) == (200, "1.0")


@pytest.mark.parametrize("version", ["2.0", "0.9", "1", "1.0.0"])
def test_a_version_the_site_does_not_speak_is_named_as_such_and_spends_nothing(client, demo_content, version):
    """A version the site does not speak is refused as what it is, naming the version the site speaks (in the site's
    version), before the rest of the envelope (whose shape another major version may change), rather than with the
    schema's regular expression; nothing is stored and the nonce stays unspent."""
    agent = VersionedAgent(client, version)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    status, reply = agent.post(body)
    assert status == 400
    assert reply["flow_type"] == "error"
    assert reply["status"] == "invalid_request"
    assert reply["fields"] == ["protocol_version"]
    assert reply["protocol_version"] == "1.0"
    assert reply["message"].startswith("This site speaks IntentWeb 1.0"), reply
    assert "^" not in reply["message"]  # no regular expression
    assert not Interaction.objects.filter(interaction_id=agent.interaction_id).exists()
    assert not IntentNonce.objects.filter(nonce=body["attribution"]["nonce"]).exists()
    # Another version's envelope of another shape: the version is what is said.
    status, reply = agent.post({"protocol_version": version, "flow_type": "intent", "text": "Is LK-TEA-0001 in stock?"})
    assert (status, reply["fields"]) == (400, ["protocol_version"])
    assert reply["message"].startswith("This site speaks IntentWeb 1.0"), reply
