"""Verified agent identity across a rotation and under copies: a handshake that spans a rotation of the site key, copies
of a signed intent sent while the original is being answered, and the trust delta a negotiation response reports when
trust is at its bounds.

The agents are those of ``tests/identity/test_verified_agents.py`` (JSON) and ``tests/asp/test_asp.py`` (protobuf),
written from the spec and the README's signed bytes with ``cryptography`` directly."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from agent_handshake.asp import asp_pb2
from agent_handshake.models import AgentSession, TrustEvent, VerifiedAgent
from tests.asp import test_asp as proto
from tests.identity.test_verified_agents import Agent, b64url, post, signed_bytes, unb64url

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


@pytest.mark.django_db(transaction=True)
def test_copies_of_a_signed_intent_sent_while_it_is_answered_move_no_trust(live_server, demo_content):
    """A signed intent is answered once; its replays are refused 401 ``replayed`` and, as documented, counted
    against the sender's network, not the agent whose message it is. Copies arriving while the original was being
    answered (a captured message replayed at once, or a client's own impatient retry) were refused only after they
    had been counted as the agent's requests: each lowered its trust (-0.02) and used up its own rate limit."""
    agent = proto.Agent(Client())
    agent.handshake()
    body = proto.frame(agent.intent("What water temperature suits gyokuro?", capabilities=["content_search"]))
    copies = 4
    barrier = threading.Barrier(copies)
    answers: list[tuple[int, bytes]] = []

    def send() -> None:
        request = urllib.request.Request(live_server.url + "/agent/asp", data=body, method="POST",
                                         headers={"Content-Type": proto.PROTOBUF})  # fmt: skip
        barrier.wait()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append((response.status, response.read()))
        except urllib.error.HTTPError as error:
            answers.append((error.code, error.read()))

    threads = [threading.Thread(target=send) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] + [401] * (copies - 1), answers
    for status, content in answers:
        if status == 401:
            assert json.loads(content)["code"] == "replayed"
    verified = VerifiedAgent.objects.get(did=agent.did)
    events = list(TrustEvent.objects.filter(agent=verified).values_list("delta", flat=True))
    assert events == [pytest.approx(0.05)], events  # the answered intent, and nothing for its copies
    assert verified.trust == pytest.approx(0.55)


@pytest.mark.parametrize(("start", "payload", "capabilities"), [
    (1.0, "How hot should the water be for gyokuro?", ["content_search"]),  # accepted, at the ceiling
    (0.0, "Book me a table for two tonight at seven", []),  # not accepted (an action), at the floor
    (0.97, "How hot should the water be for gyokuro?", ["content_search"]),  # accepted, clamped on the way up
])  # fmt: skip
def test_a_negotiation_responses_trust_delta_is_the_change_made_to_the_agents_trust(
    client, demo_content, start, payload, capabilities
):
    """``trust_delta`` is documented (and signed) as the change the intent made to the agent's trust here. Trust is
    clamped to [0, 1], yet an agent at the ceiling was told +0.05 and one at the floor -0.02 for a change of 0."""
    agent = proto.Agent(client)
    agent.handshake()
    VerifiedAgent.objects.filter(did=agent.did).update(trust=start)
    response = proto.post(client, proto.frame(agent.intent(payload, capabilities=capabilities)))
    assert response.status_code == 200, response.content
    answer = proto.unframe(response.content)
    after = VerifiedAgent.objects.get(did=agent.did).trust
    assert answer.trust_delta == pytest.approx(after - start, abs=1e-6), (answer.accepted, answer.trust_delta, after)
