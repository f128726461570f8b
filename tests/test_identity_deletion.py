"""Deleting a verified agent, whatever deletes it."""

from __future__ import annotations

import pytest
from django.test import Client

from agent_handshake.models import AgentClient, AgentSession, ApiKey, ConverseSession, VerifiedAgent
from tests import test_asp
from tests.test_verified_agents import Agent, converse, post

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agent_handshake/verifiedagent/"


def handshaken(client) -> tuple[Agent, VerifiedAgent]:
    agent = Agent(client)
    agent.handshake()
    return agent, VerifiedAgent.objects.select_related("key__client").get(did=agent.did)


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
