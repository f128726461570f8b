"""The admin screens editors and operators use: permissions, odd input, large histories, escaping."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted

from agent_handshake.models import AgentClient, ApiKey, TrustEvent, VerifiedAgent
from tests.admin.test_admin_screens import shown_form

pytestmark = pytest.mark.django_db


def verified_agent(**fields) -> VerifiedAgent:
    key, _ = ApiKey.objects.issue(AgentClient.objects.create(name="did agent"))
    fields.setdefault("did", "did:agent-semantic-protocol:" + "ab" * 32)
    return VerifiedAgent.objects.create(public_key="A" * 43, key=key, **fields)


def test_an_agent_with_a_long_trust_history_can_still_be_blocked(admin_client):
    """Every request an agent makes writes a trust event. The change page listed each one as an inline row with
    hidden fields, so past ~500 requests the operator's save (blocking the busiest agent) was refused with a bare
    "Bad Request (400)" (more than DATA_UPLOAD_MAX_NUMBER_FIELDS), and the page grew without bound."""
    agent = verified_agent()
    TrustEvent.objects.bulk_create(
        [TrustEvent(agent=agent, delta=0.05, trust=0.5, reason=f"POST /agent/converse #{n}") for n in range(1200)]
    )
    TrustEvent.objects.create(agent=agent, delta=-0.02, trust=0.48, reason="the newest one: GET /<script>x</script>")
    url = f"/admin/agent_handshake/verifiedagent/{agent.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "the newest one: GET /&lt;script&gt;" in page  # the history is still shown, escaped, newest first ...
    assert "#0<" not in page  # ... but not all of it
    form = shown_form(admin_client, url)
    form["blocked"] = ["on"]
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.blocked


@pytest.mark.parametrize("typed", ['"orders"', "5", '{"orders": true}', '[["orders"]]', '["orders", 5]', "null"])
def test_an_agents_extra_scopes_must_be_a_list_of_scope_names(admin_client, typed):
    """The extra scopes are a JSON field: an operator who typed ``"orders"`` (a JSON string) gave the agent the
    scopes "o", "r", "d", "e", "s", and a number or a nested list made every request of that agent a 500 (its
    scopes are a set built on each request). The form refuses anything but a list of scope names."""
    agent = verified_agent(scopes=["bookings"])
    url = f"/admin/agent_handshake/verifiedagent/{agent.pk}/change/"
    form = shown_form(admin_client, url)
    form["scopes"] = [typed]
    response = admin_client.post(url, form)
    assert response.status_code == 200  # the form again, with the error
    assert "a list of scope names" in response.content.decode()
    agent.refresh_from_db()
    assert agent.scopes == ["bookings"]

    form["scopes"] = ['["orders", "bookings"]']
    assert admin_client.post(url, form).status_code == 302
    agent.refresh_from_db()
    assert agent.scopes == ["orders", "bookings"]


def test_api_key_pages_do_not_list_every_agent_client(admin_client):
    """Every DID that completes a handshake gets an agent client of its own, and anyone may make DIDs: the API key
    list's client filter and the key form's client menu listed every one of them, so a few thousand handshakes made
    the operators' key pages megabytes long. The form picks the client by search; the filter tells the keys
    operators issued from those of verified agents."""
    clients = AgentClient.objects.bulk_create(
        [AgentClient(name=f"did:agent-semantic-protocol:{n:064x}") for n in range(3000)]
    )
    key, _ = ApiKey.objects.issue(clients[0], name="issued by hand")
    agent = verified_agent()
    for url in ("/admin/agent_handshake/apikey/", "/admin/agent_handshake/apikey/add/",
                f"/admin/agent_handshake/apikey/{key.pk}/change/"):  # fmt: skip
        page = admin_client.get(url)
        assert page.status_code == 200
        assert f"{2999:064x}" not in page.content.decode(), url
        assert len(page.content) < 100_000, url

    issued = admin_client.get("/admin/agent_handshake/apikey/?held_by=clients").content.decode()
    assert "issued by hand" in issued
    assert agent.key.key_id not in issued
    verified = admin_client.get("/admin/agent_handshake/apikey/?held_by=verified").content.decode()
    assert agent.key.key_id in verified
    assert "issued by hand" not in verified

    # The form's search finds the client, and the form issues a key for the client chosen.
    found = admin_client.get(
        "/admin/autocomplete/",
        {"app_label": "agent_handshake", "model_name": "apikey", "field_name": "client", "term": f"{2999:064x}"},
    )
    assert found.status_code == 200
    assert [result["id"] for result in found.json()["results"]] == [str(clients[2999].pk)]
    response = admin_client.post(
        "/admin/agent_handshake/apikey/add/", {"client": clients[2999].pk, "name": "found by search", "scopes": ["*"]}
    )
    assert response.status_code == 200, response.content.decode()[:3000]
    assert ApiKey.objects.get(name="found by search").client == clients[2999]


def test_editing_a_key_keeps_a_scope_no_capability_declares_now(admin_client):
    """A key's scope whose capability is not registered now (turned off for a while, or renamed in a release) had
    no box on the change page, so renaming the key or moving its expiry silently took the scope away: when the
    capability came back, the agent got 403. The page shows such a scope, ticked, and keeps it unless unticked."""
    key, _ = ApiKey.objects.issue(AgentClient.objects.create(name="Crawler Co"), name="old", scopes=["retired_scope"])
    url = f"/admin/agent_handshake/apikey/{key.pk}/change/"
    form = shown_form(admin_client, url)
    assert form["scopes"] == ["retired_scope"]  # shown, ticked
    form["name"] = ["new"]
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    key.refresh_from_db()
    assert (key.name, key.scopes) == ("new", ["retired_scope"])

    form = shown_form(admin_client, url)
    form["scopes"] = []  # untick it: the operator's choice
    assert admin_client.post(url, form).status_code == 302
    key.refresh_from_db()
    assert key.scopes == []


def test_a_second_operators_answer_is_not_reported_as_sent(client, django_capture_on_commit_callbacks):
    """Two operators answer the same desk request: the first answer completes it, the second is refused. The
    second operator was shown the refusal and, beside it, "was changed successfully", and the admin's history
    recorded their answer as a change: as if it had reached the agent."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.auth.models import User
    from django.contrib.messages import get_messages
    from django.test import Client

    from agent_handshake.models import Job

    job = Job.objects.create(capability="escalate_to_human", query="Smoky tea for a café?", status=Job.Status.WAITING,
                             input={"message": "Smoky tea for a café?"}, needs_operator=True)  # fmt: skip
    url = f"/admin/agent_handshake/deskrequest/{quote(job.pk)}/change/"
    first, second = Client(), client
    first.force_login(User.objects.create_superuser("ann", "ann@example.com", "pw"))
    second.force_login(User.objects.create_superuser("bob", "bob@example.com", "pw"))
    assert second.get(url).status_code == 200  # bob's page, with the answer box

    with django_capture_on_commit_callbacks(execute=True):
        assert first.post(url, {"operator_answer": "Yes: Lapsang, 2 kg."}).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        response = second.post(url, {"operator_answer": "No, sorry."}, follow=True)
    assert response.status_code == 200
    shown = [str(message) for message in get_messages(response.wsgi_request)]
    shown += [str(message) for message in response.context["messages"]]
    assert any("no longer takes an answer" in text or "takes no answer" in text for text in shown), shown
    assert not any("successfully" in text for text in shown), shown
    assert not LogEntry.objects.filter(user__username="bob").exists()
    job.refresh_from_db()
    assert job.answered_by.username == "ann"
