"""Verified agent identity, reviewed adversarially: a handshake that spans a rotation of the site key, and copies
of a signed intent sent while the original is being answered.

The agents are those of ``tests/test_verified_agents.py`` (JSON) and ``tests/test_asp.py`` (protobuf), written
from the spec and the README's signed bytes with ``cryptography`` directly."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from agent_handshake.asp import asp_pb2
from agent_handshake.models import AgentSession
from tests import test_asp as proto
from tests.test_verified_agents import Agent, b64url, post, signed_bytes, unb64url

pytestmark = pytest.mark.django_db


def rotate() -> None:
    call_command("agent_site_key", "--rotate", stdout=StringIO())


def test_a_json_handshake_begun_before_the_site_key_rotated_is_completed_after_it(client, tmp_path, settings):
    """The agent signs the site DID the site answered with. A rotation between its two messages (or a worker not
    yet restarted after one answering the first, a restarted one the second) made the site check the signature
    against its new DID: 401 ``signature_invalid`` for a correct answer, every time workers disagreed."""
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(tmp_path / "k.pem")}):
        agent = Agent(client)
        response, _hello = agent.begin()
        answer = response.json()
        rotate()
        assert client.get("/.well-known/agent.json").json()["integrations"]["agent_identity"]["did"] != answer["did"]
        signature = agent.key.sign(signed_bytes("initiator", agent.did, answer["did"], unb64url(answer["challenge"])))
        verified = post(client, "/agent/handshake/verify", {"handshake_id": answer["handshake_id"], "did": agent.did,
                                                            "challenge_response": b64url(signature)})  # fmt: skip
        assert verified.status_code == 200, verified.json()
        assert verified.json()["access_token"].startswith("asp_")
        # A signature naming the new DID, which this handshake never spoke with, is still refused.
        agent2 = Agent(client)
        response, _hello = agent2.begin()
        answer2 = response.json()
        rotate()
        new_did = client.get("/.well-known/agent.json").json()["integrations"]["agent_identity"]["did"]
        wrong = agent2.key.sign(signed_bytes("initiator", agent2.did, new_did, unb64url(answer2["challenge"])))
        refused = post(client, "/agent/handshake/verify", {"handshake_id": answer2["handshake_id"], "did": agent2.did,
                                                           "challenge_response": b64url(wrong)})  # fmt: skip
        assert (refused.status_code, refused.json()["code"]) == (401, "signature_invalid")
        assert AgentSession.objects.count() == 1


def test_a_protobuf_handshake_begun_before_the_site_key_rotated_is_completed_after_it(client, tmp_path, settings):
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(tmp_path / "k.pem")}):
        agent = proto.Agent(client)
        response = proto.post(client, proto.frame(agent.hello()))
        assert response.status_code == 200, response.content
        answer = proto.unframe(response.content)
        rotate()
        signature = agent.key.sign(proto.handshake_bytes("initiator", agent.did, answer.did, answer.challenge))
        second = asp_pb2.HandshakeMessage(did=agent.did, challenge=answer.challenge, challenge_response=signature)
        response = proto.post(client, proto.frame(second))
        assert response.status_code == 200, response.content
        credential = proto.unframe(response.content)
        assert credential.access_token.startswith("asp_")
        converse = post(client, "/agent/converse", {"ahp": "0.1", "capability": "site_info", "query": "Who are you?"},
                        HTTP_AUTHORIZATION=f"Bearer {credential.access_token}")  # fmt: skip
        assert converse.status_code == 200, converse.content
