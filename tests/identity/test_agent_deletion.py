"""Deleting a verified agent, whatever deletes it, and why a blocked DID cannot be deleted (it would come back)."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction
from django.db.models import ProtectedError
from django.test import Client

from agent_handshake.models import AgentClient, AgentSession, ApiKey, ConverseSession, VerifiedAgent
from tests.admin.test_verified_agent_delete import CHANGELIST, handshaken
from tests.asp import test_asp
from tests.content.test_indexing_concurrency import wait_for, worker
from tests.identity.test_verified_agents import Agent, b64url, converse, post, signed_bytes, unb64url

pytestmark = pytest.mark.django_db


def delete_one(verified: VerifiedAgent, how: str) -> None:
    if how == "instance":
        verified.delete()
    else:  # the queryset path, which never calls Model.delete()
        VerifiedAgent.objects.filter(did=verified.did).delete()


def refused_everywhere(client, headers: dict, status: int) -> None:
    """Every JSON front door refuses the credential with ``status``."""
    requests = {
        "AHP": lambda: post(client, "/agent/converse", {"ahp": "0.1", "capability": "content_search",
                                                       "query": "gyokuro water temperature"}, **headers),
        "NLWeb": lambda: post(client, "/ask", {"query": {"text": "gyokuro water temperature"}}, **headers),
        "MCP": lambda: post(client, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "content_search", "arguments": {"query": "gyokuro"}}}, **headers),
        "OpenAPI": lambda: post(client, "/capabilities/content_search", {"query": "gyokuro"}, **headers),
        "schema templates": lambda: client.get("/schema-templates", **headers),
    }  # fmt: skip
    for door, request in requests.items():
        response = request()
        assert response.status_code == status, (door, response.content[:300])


@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_deleting_a_verified_agent_in_code_takes_its_key_and_client_with_it(client, demo_content, how):
    """Only the admin deleted the agent's key and client: ``delete()`` from code or the shell, and a queryset's
    ``delete()``, left the key (its secret still a credential) and the client, and the DID's next handshake got a
    second client, "<did> (2)"."""
    agent, verified = handshaken(client)
    assert converse(client, agent).status_code == 200  # a converse session owned by the agent's key
    key, own_client = verified.key, verified.key.client
    secret = key.secret()
    assert post(client, "/capabilities/content_search", {"query": "gyokuro"}, HTTP_X_AHP_KEY=secret).status_code == 200

    delete_one(verified, how)

    assert not VerifiedAgent.objects.filter(did=agent.did).exists()
    assert not ApiKey.objects.filter(pk=key.pk).exists()
    assert not AgentClient.objects.filter(pk=own_client.pk).exists()
    assert not ConverseSession.objects.filter(api_key_id=key.pk).exists()
    assert not AgentSession.objects.exists()
    refused_everywhere(client, {"HTTP_X_AHP_KEY": secret}, 401)
    refused_everywhere(client, agent.headers, 401)
    agent.handshake()
    assert VerifiedAgent.objects.select_related("key__client").get(did=agent.did).key.client.name == agent.did


def test_deleting_agents_in_code_keeps_a_client_that_holds_other_keys(client, db):
    """A client an operator issued another key to stays, with that key; only the agent's own key goes."""
    (_, alone), (_, shared) = handshaken(client), handshaken(client)
    other_key, _secret = ApiKey.objects.issue(shared.key.client, name="issued by hand", scopes=["orders"])
    VerifiedAgent.objects.filter(pk__in=[alone.pk, shared.pk]).delete()
    assert not ApiKey.objects.filter(pk__in=[alone.key.pk, shared.key.pk]).exists()
    assert not AgentClient.objects.filter(pk=alone.key.client.pk).exists()
    assert list(shared.key.client.keys.all()) == [other_key]


@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_a_blocked_agent_cannot_be_deleted_in_code(client, demo_content, how):
    """Deleting a blocked agent un-blocked its DID: its next handshake succeeded and started again at trust 0.5.
    It is now refused like a protected relation (``ProtectedError``, nothing deleted), inside a transaction too,
    which stays usable; a queryset with one blocked agent among others deletes none of them."""
    agent, verified = handshaken(client)
    _, other = handshaken(client)
    VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=True, trust=0.1)
    verified.refresh_from_db()

    both = VerifiedAgent.objects.filter(pk__in=[verified.pk, other.pk])
    with transaction.atomic():
        with pytest.raises(ProtectedError) as refused:
            (verified.delete if how == "instance" else both.delete)()
        assert VerifiedAgent.objects.count() == 2  # the transaction is still usable, and nothing went
    assert "blocked" in str(refused.value)
    assert agent.did in str(refused.value)
    assert set(refused.value.protected_objects) == {verified}
    assert VerifiedAgent.objects.filter(pk=other.pk).exists()
    kept = VerifiedAgent.objects.get(did=agent.did)
    assert (kept.blocked, kept.trust, kept.key_id) == (True, 0.1, verified.key_id)

    response, _hello = agent.begin()
    assert (response.status_code, response.json()["code"]) == (403, "blocked")
    refused_everywhere(client, agent.headers, 403)
    # Unblocked first, it may be deleted (and the DID may come back).
    VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=False)
    verified.refresh_from_db()
    delete_one(verified, how)
    assert not VerifiedAgent.objects.filter(did=agent.did).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_an_agent_blocked_while_it_is_being_deleted_stays(how):
    """An operator blocks an agent while another deletes it (from a page or a shell that read it unblocked): the
    deletion waits for the block to commit, sees it, and is refused, rather than deleting the agent just blocked."""
    key, _secret = ApiKey.objects.issue(AgentClient.objects.create(name="its own"), scopes=[])
    agent = VerifiedAgent.objects.create(did="did:agent-semantic-protocol:" + "ab" * 32, public_key="A" * 43, key=key)
    errors: list[BaseException] = []
    deleting = threading.Thread(target=worker(lambda: delete_one(VerifiedAgent.objects.get(pk=agent.pk), how), errors))
    with transaction.atomic():
        VerifiedAgent.objects.filter(pk=agent.pk).update(blocked=True)  # the block, not yet committed
        deleting.start()
        wait_for(1, unless=deleting)
    deleting.join(30)
    assert [type(error) for error in errors] == [ProtectedError]
    assert VerifiedAgent.objects.get(pk=agent.pk).blocked
    assert ApiKey.objects.filter(pk=key.pk).exists()


def test_the_admin_refuses_to_delete_a_blocked_agent_and_says_why(admin_client, client, db):
    """The delete page of a blocked agent, and "Delete selected" with one among the selection, say that it is
    blocked and must be unblocked first, and delete nothing (confirming included)."""
    (agent, blocked), (_, other) = handshaken(client), handshaken(client)
    VerifiedAgent.objects.filter(pk=blocked.pk).update(blocked=True)

    url = f"{CHANGELIST}{blocked.pk}/delete/"
    for response in (admin_client.get(url), admin_client.post(url, {"post": "yes"})):
        assert response.status_code == 200
        shown = response.content.decode()
        assert "Cannot delete" in shown
        assert f'{blocked.pk}/change/">{agent.did}</a>, which is blocked. Unblock it first to delete it' in shown
    selected = {"action": "delete_selected", "_selected_action": [blocked.pk, other.pk]}
    for confirmed in ({}, {"post": "yes"}):
        response = admin_client.post(CHANGELIST, {**selected, **confirmed})
        assert response.status_code == 200
        assert f"{agent.did}</a>, which is blocked. Unblock it first" in response.content.decode()
    assert VerifiedAgent.objects.filter(pk__in=[blocked.pk, other.pk]).count() == 2
    assert VerifiedAgent.objects.get(pk=blocked.pk).blocked
    assert ApiKey.objects.filter(pk=blocked.key_id).exists()


def test_credentials_issued_before_a_block_are_refused_at_once(admin_client, client, demo_content):
    """An operator blocks agents in the admin while they hold live sessions, sign intents and have a handshake half
    done: from the next request on, each is refused (403 ``blocked``), without waiting for the session to expire."""
    agent = test_asp.Agent(client)
    agent.handshake()  # over protobuf: a session for the JSON doors too, and signed intents
    headers = {"HTTP_AUTHORIZATION": f"Bearer {agent.token}"}
    json_agent = Agent(client)
    json_agent.handshake()
    begun, _hello = json_agent.begin()
    pending = begun.json()
    for token_headers in (headers, json_agent.headers):
        assert post(client, "/capabilities/content_search", {"query": "gyokuro"}, **token_headers).status_code == 200

    for did in (agent.did, json_agent.did):
        verified = VerifiedAgent.objects.get(did=did)
        url = f"{CHANGELIST}{verified.pk}/change/"
        form = {"trust": str(verified.trust), "scopes": "[]", "blocked": "on"}
        assert admin_client.post(url, form).status_code == 302
        assert VerifiedAgent.objects.get(did=did).blocked

    refused_everywhere(client, headers, 403)
    refused_everywhere(client, json_agent.headers, 403)
    intent = test_asp.post(client, test_asp.frame(agent.intent("gyokuro water temperature")))
    test_asp.error_of(intent, 403, "blocked")
    # The handshake begun before the block cannot be completed.
    signature = json_agent.key.sign(
        signed_bytes("initiator", json_agent.did, pending["did"], unb64url(pending["challenge"]))
    )
    completed = post(client, "/agent/handshake/verify", {"handshake_id": pending["handshake_id"], "did": json_agent.did,
                                                         "challenge_response": b64url(signature)})  # fmt: skip
    assert (completed.status_code, completed.json()["code"]) == (403, "blocked")


def test_credentials_issued_before_a_delete_are_refused_at_once(client, demo_content):
    """A deleted agent's session, the signed intents of its DID and its key's secret are refused from the next
    request on (401: the DID is no longer known here), until it completes a new handshake."""
    agent = test_asp.Agent(client)
    agent.handshake()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {agent.token}"}
    verified = VerifiedAgent.objects.select_related("key").get(did=agent.did)
    secret = verified.key.secret()
    assert post(client, "/capabilities/content_search", {"query": "gyokuro"}, **headers).status_code == 200

    VerifiedAgent.objects.filter(pk=verified.pk).delete()

    refused_everywhere(client, headers, 401)
    refused_everywhere(client, {"HTTP_X_AHP_KEY": secret}, 401)
    intent = test_asp.post(client, test_asp.frame(agent.intent("gyokuro water temperature")))
    test_asp.error_of(intent, 401, "unverified_did")
    anonymous = Client()
    assert post(anonymous, "/capabilities/content_search", {"query": "gyokuro"}).status_code == 200  # still public
