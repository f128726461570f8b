"""A callback URL whose host the site's resolver cannot look up right now (EAI_AGAIN, or no answer in time) is the
site's problem, not the agent's URL: every door answers 503 with Retry-After in its own error shape, naming the
field, and queues nothing, so the agent sends the same request again later instead of giving up on a good URL."""

from __future__ import annotations

import json
import socket

import pytest

from agent_handshake.models import AgentClient, ApiKey, Job
from tests.intentweb.test_intentweb import Agent

pytestmark = pytest.mark.django_db

FLAKY = "hook.flaky.example"


@pytest.fixture
def flaky_resolver(monkeypatch, settings):
    """The name servers answer "try again" for FLAKY (a temporary failure); other names resolve."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": []}
    resolve = socket.getaddrinfo

    def lookup(host, *args, **kwargs):
        if host == FLAKY:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)


def secret() -> str:
    agent, _ = AgentClient.objects.get_or_create(name="Callback agent")
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def assert_retry_later(response) -> None:
    assert response.status_code == 503, response.content
    assert 0 < int(response["Retry-After"]) <= 300
    assert not Job.objects.exists()


@pytest.mark.usefixtures("flaky_resolver")
def test_ahp_answers_503_with_retry_after(client):
    body = {
        "capability": "escalate_to_human",
        "query": "Please have someone look at my order",
        "context": {"callback_url": f"https://{FLAKY}/hook", "accept_types": ["application/data", "text/answer"]},
    }
    response = client.post("/agent/converse", json.dumps(body), content_type="application/json",
                           headers={"Authorization": f"Bearer {secret()}"})  # fmt: skip
    assert_retry_later(response)
    error = response.json()  # AHP §10
    assert (error["status"], error["code"], error["fields"]) == ("error", "unavailable", ["context.callback_url"])
    assert FLAKY in error["message"]


@pytest.mark.usefixtures("flaky_resolver")
def test_intentweb_answers_503_with_retry_after_and_the_message_can_be_sent_again(client, settings):
    agent = Agent(client, secret=secret())
    body = agent.envelope("intent_request", "I'd like to speak to someone", callback_url=f"https://{FLAKY}/hook")
    status, reply = agent.post(body)
    assert status == 503, reply
    assert (reply["flow_type"], reply["status"], reply["fields"]) == ("error", "unavailable", ["callback_url"])
    assert not Job.objects.exists()
    # Nothing was spent: the same message, once the name resolves, is accepted.
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.0/8"]}
    body["callback_url"] = "http://localhost/hook"
    status, reply = agent.post(body)
    assert (status, reply["status"]) == (200, "accepted"), reply
    assert Job.objects.get().callback_url == "http://localhost/hook"


def test_an_idempotent_retry_after_the_503_is_run_not_replayed(client, flaky_resolver, settings):
    """The 503 is not the request's answer: a retry under the same Idempotency-Key, once the host resolves, is run."""
    key = secret()

    def call(url: str):
        body = {
            "capability": "escalate_to_human",
            "query": "Please have someone look at my order",
            "context": {"callback_url": url, "accept_types": ["application/data", "text/answer"]},
        }
        return client.post("/agent/converse", json.dumps(body), content_type="application/json",
                           headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "order-1"})  # fmt: skip

    assert_retry_later(call(f"https://{FLAKY}/hook"))
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.0/8"]}
    response = call("http://localhost/hook")
    assert response.status_code == 202, response.content
    assert "Idempotent-Replayed" not in response
    assert Job.objects.get().callback_url == "http://localhost/hook"
