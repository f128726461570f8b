"""Deleting a verified agent in the admin: its API key and the agent client its first handshake made go with it."""

from __future__ import annotations

import pytest

from agent_handshake.models import AgentClient, AgentSession, ApiKey, ConverseSession, VerifiedAgent
from tests.identity.test_verified_agents import Agent, converse, post

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agent_handshake/verifiedagent/"


def handshaken(client) -> tuple[Agent, VerifiedAgent]:
    agent = Agent(client)
    agent.handshake()
    return agent, VerifiedAgent.objects.select_related("key__client").get(did=agent.did)


def test_deleting_a_verified_agent_takes_its_key_and_client_with_it(admin_client, client, demo_content):
    """The agent's key is ``on_delete=PROTECT``ed by the agent, not deleted with it: deleting the agent left its key
    (unrevoked, usable by its secret) and the client made for it, listed among the keys "issued here", and the DID's
    next handshake got a second client, "<did> (2)". The delete page now lists them and deletes them too."""
    agent, verified = handshaken(client)
    assert converse(client, agent).status_code == 200  # a session of the agent's key
    key, own_client = verified.key, verified.key.client
    secret = key.secret()  # what the server can recompute (to sign callbacks): a live credential while the key is
    assert post(client, "/capabilities/content_search", {"query": "gyokuro"}, HTTP_X_AHP_KEY=secret).status_code == 200

    url = f"{CHANGELIST}{verified.pk}/delete/"
    page = admin_client.get(url)
    assert page.status_code == 200
    shown = page.content.decode()
    assert "Cannot delete" not in shown
    assert "protected" not in shown
    assert f"/admin/agent_handshake/apikey/{key.pk}/change/" in shown  # listed with what goes with the agent
    assert f"/admin/agent_handshake/agentclient/{own_client.pk}/change/" in shown
    assert "Converse session" in shown

    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert not VerifiedAgent.objects.filter(did=agent.did).exists()
    assert not ApiKey.objects.filter(pk=key.pk).exists()
    assert not AgentClient.objects.filter(pk=own_client.pk).exists()
    assert not ConverseSession.objects.filter(api_key_id=key.pk).exists()
    assert not AgentSession.objects.exists()
    for headers in ({"HTTP_X_AHP_KEY": secret}, agent.headers):
        refused = post(client, "/capabilities/content_search", {"query": "gyokuro"}, **headers)
        assert refused.status_code == 401, refused.content[:300]

    # The DID's next handshake starts afresh: a client named by the DID again, not "<did> (2)".
    agent.handshake()
    assert VerifiedAgent.objects.select_related("key__client").get(did=agent.did).key.client.name == agent.did


def test_deleting_selected_agents_keeps_a_client_that_holds_other_keys(admin_client, client, db):
    """The changelist's "Delete selected" action: each agent's key goes; its client too, unless it holds a key an
    operator issued it (that client, and that key, stay)."""
    (_, alone), (_, shared) = handshaken(client), handshaken(client)
    other_key, _secret = ApiKey.objects.issue(shared.key.client, name="issued by hand", scopes=["orders"])
    kept = VerifiedAgent.objects.create(
        did="did:agent-semantic-protocol:" + "cd" * 32,
        public_key="A" * 43,
        key=ApiKey.objects.issue(AgentClient.objects.create(name="kept"), scopes=[])[0],
    )
    selected = {"action": "delete_selected", "_selected_action": [alone.pk, shared.pk]}

    page = admin_client.post(CHANGELIST, selected)
    assert page.status_code == 200
    shown = page.content.decode()
    assert "Cannot delete" not in shown
    for listed in (alone.key, shared.key, alone.key.client):
        assert f"/{listed._meta.model_name}/{listed.pk}/change/" in shown, listed
    assert f"/agentclient/{shared.key.client.pk}/change/" not in shown
    assert f"/apikey/{other_key.pk}/change/" not in shown

    response = admin_client.post(CHANGELIST, {**selected, "post": "yes"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(VerifiedAgent.objects.all()) == [kept]
    assert not ApiKey.objects.filter(pk__in=[alone.key.pk, shared.key.pk]).exists()
    assert not AgentClient.objects.filter(pk=alone.key.client.pk).exists()
    assert list(shared.key.client.keys.all()) == [other_key]
    assert ApiKey.objects.filter(pk=kept.key.pk).exists()


def test_deleting_an_agent_needs_the_permission_to_delete_its_key(client, db):
    """What goes with the agent is deleted with the operator's permissions, as Django's cascades are: one who may
    delete verified agents but not API keys is told so, and nothing is deleted."""
    from django.contrib.auth.models import Permission, User

    _, verified = handshaken(client)
    operator = User.objects.create_user("op", is_staff=True)
    operator.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_verifiedagent", "delete_verifiedagent"])
    )
    client.force_login(operator)
    url = f"{CHANGELIST}{verified.pk}/delete/"
    page = client.get(url)
    assert page.status_code == 200
    shown = page.content.decode()
    assert "API key" in shown
    assert "permission" in shown
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert VerifiedAgent.objects.filter(pk=verified.pk).exists()
