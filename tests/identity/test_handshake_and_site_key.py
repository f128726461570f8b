"""Verified agent identity at its edges, where the other test files do not reach: a request path holding a NUL, two
rotations of the site key in one second, a first message replayed after its handshake, the site named by BASE_URL behind
a proxy, a protobuf second message for no waiting handshake, a verified agent's client of its own, and the values the
replay guards spend.

The agents here are those of ``tests/identity/test_verified_agents.py`` and ``tests/asp/test_asp.py``, written from the
spec and the README's signed bytes."""

from __future__ import annotations

import datetime
import time

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from agent_handshake.asp import asp_pb2
from agent_handshake.models import (
    AgentClient,
    ApiKey,
    IntentNonce,
    PendingHandshake,
    SeenSignature,
    TrustEvent,
    VerifiedAgent,
)
from tests.asp import test_asp as proto
from tests.identity.test_verified_agents import Agent, b64url, post, signed_bytes, unb64url

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


def test_a_first_message_replayed_after_its_handshake_is_refused(client, db):
    """ "A replayed first message is refused" (README): it was, only while its pending handshake lived; once the
    handshake was completed (or had expired and been cleaned up) the same message, still within the timestamp's
    skew, began a new handshake."""
    agent = Agent(client)
    response, hello = agent.begin()
    answer = response.json()
    signature = agent.key.sign(signed_bytes("initiator", agent.did, answer["did"], unb64url(answer["challenge"])))
    verified = post(client, "/agent/handshake/verify", {"handshake_id": answer["handshake_id"], "did": agent.did,
                                                         "challenge_response": b64url(signature)})  # fmt: skip
    assert verified.status_code == 200, verified.json()
    again = post(client, "/agent/handshake", hello)
    assert again.status_code == 401, again.json()
    assert (again.json()["code"], again.json()["fields"]) == ("replayed_challenge", ["challenge"])
    # Nor after an unfinished handshake's row is gone (expired, then deleted by the clean-up).
    response, hello = agent.begin()
    PendingHandshake.objects.all().delete()
    again = post(client, "/agent/handshake", hello)
    assert (again.status_code, again.json()["code"]) == (401, "replayed_challenge")
    assert not PendingHandshake.objects.exists()
    # Over protobuf too: the first message's challenge is spent whichever door it came through.
    hello = {**agent.hello(), "timestamp": int(time.time())}
    message = asp_pb2.HandshakeMessage(did=agent.did, public_key=agent.public, timestamp=time.time_ns())
    message.challenge = unb64url(hello["challenge"])
    frame = proto.frame(message)
    assert proto.post(client, frame).status_code == 200
    again = post(client, "/agent/handshake", hello)
    assert (again.status_code, again.json()["code"]) == (401, "replayed_challenge")


def test_the_json_handshake_names_the_site_by_base_url_as_the_protobuf_one_does(client, db, settings):
    """Behind a proxy the request's own host and scheme are not the site's: BASE_URL is (every other door's links
    use it). The JSON answer's ``verify`` link and ``agent_id`` were built from the request, so they pointed at
    http://<the proxy's upstream>/ while the protobuf answer, for the same site, said BASE_URL."""
    from django.test import override_settings

    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "BASE_URL": "https://teahouse.example/"}):
        agent = Agent(client)
        answer = agent.begin()[0].json()
        framed = proto.post(client, proto.frame(proto.Agent(client).hello()))
    assert answer["verify"] == "https://teahouse.example/agent/handshake/verify"
    assert answer["agent_id"] == "https://teahouse.example/"
    assert proto.unframe(framed.content).agent_id == answer["agent_id"]


def test_a_protobuf_second_message_for_no_waiting_handshake_names_the_challenge(client, db):
    """A HandshakeMessage carries no handshake id: the site's challenge, echoed, names the handshake. A second
    message whose challenge matches none (spent, or never sent) was refused as naming an unknown ``handshake_id``,
    a field the agent never sent."""
    agent = proto.Agent(client)
    agent.handshake()
    second = asp_pb2.HandshakeMessage(did=agent.did, challenge=bytes(32), challenge_response=bytes(64))
    body = proto.error_of(proto.post(client, proto.frame(second)), 401, "unknown_handshake")
    assert body["fields"] == ["challenge"]
    assert "handshake_id" not in body["message"]


def test_a_verified_agent_gets_a_client_of_its_own_even_if_another_has_its_dids_name(demo_content):
    """A verified agent's first handshake made its client with ``get_or_create(name=did)``: a client an operator
    had created (or renamed) to that name was taken over, so the DID's requests were counted, logged and refused as
    that client's (here an inactive one: every request a 401 "client inactive")."""
    client = Client(raise_request_exception=False)
    agent = Agent(client)
    theirs = AgentClient.objects.create(name=agent.did, contact_email="ops@partner.example", is_active=False)
    partner_key, _secret = ApiKey.objects.issue(theirs, name="partner", scopes=["orders"])
    agent.handshake()
    verified = VerifiedAgent.objects.select_related("key__client").get(did=agent.did)
    assert verified.key.client != theirs
    assert list(theirs.keys.all()) == [partner_key]  # the operator's client holds only its own key
    assert verified.key.client.name.startswith(agent.did)  # still found by the DID in the admin's search
    ask = post(client, "/ask", {"query": {"text": "gyokuro water temperature"}}, **agent.headers)
    assert ask.status_code == 200, ask.content[:300]

    # An operator deletes the verified agent: its next handshake starts afresh, with a client of its own again.
    verified.delete()
    agent.handshake()
    again = VerifiedAgent.objects.select_related("key__client").get(did=agent.did)
    assert again.key.client not in (theirs, verified.key.client)
    assert list(again.key.client.keys.all()) == [again.key]
    ask = post(client, "/ask", {"query": {"text": "gyokuro water temperature"}}, **agent.headers)
    assert ask.status_code == 200, ask.content[:300]


@pytest.mark.parametrize("model", [SeenSignature, IntentNonce])
def test_a_spent_value_is_refused_once_spent_and_forgotten_only_when_old(model):
    """The replay guards (signed requests' signatures, handshake challenges, ASP intents, IntentWeb nonces) share
    one model shape: spending a value twice is refused, in a transaction too, and a clean-up keeps recent rows."""
    assert model.spend("first") is True
    with transaction.atomic():  # a replay refused inside a transaction leaves it usable
        assert model.spend("first") is False
        assert model.spend("second") is True
    now = timezone.now()
    model.objects.filter(pk="first").update(created_at=now - datetime.timedelta(hours=1))
    assert model.forget_before(now - datetime.timedelta(minutes=10)) == 1
    assert list(model.objects.values_list("pk", flat=True)) == ["second"]
    assert model.spend("first") is True  # forgotten: its timestamp check refuses it by now
