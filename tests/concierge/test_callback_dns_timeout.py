"""A callback host's name lookup is bounded in time: socket.getaddrinfo() has no timeout of its own, and the agent
chooses the host, so the name server too."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from django.conf import settings
from django.test import override_settings

from agent_handshake.concierge.callbacks import UnsafeCallbackURL, check_callback_url, deliver
from agent_handshake.models import AgentClient, ApiKey, Job

STALLED = "hook.stalled.example"


def callback_settings(**values):
    return override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, **values})


@pytest.fixture
def stalled_resolver(monkeypatch):
    """Lookups of STALLED wait on a name server that does not answer (until the test ends); others resolve."""
    released = threading.Event()
    resolve = socket.getaddrinfo

    def lookup(host, *args, **kwargs):
        if host == STALLED:
            released.wait(20)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    yield
    released.set()


def timed(function, *args, **kwargs):
    started = time.monotonic()
    result = function(*args, **kwargs)
    return result, time.monotonic() - started


@pytest.mark.usefixtures("stalled_resolver")
def test_a_name_server_that_does_not_answer_holds_the_check_no_longer_than_the_connect_timeout():
    with callback_settings(CALLBACK_CONNECT_TIMEOUT=0.5, CALLBACK_ALLOWED_NETWORKS=[]):
        started = time.monotonic()
        with pytest.raises(UnsafeCallbackURL, match=r"did not resolve within 0\.5 seconds") as refused:
            check_callback_url(f"https://{STALLED}/hook")
        elapsed = time.monotonic() - started
    assert elapsed < 2, elapsed
    assert refused.value.temporary  # the site's resolver, not the agent's URL: a delivery tries again


@pytest.mark.usefixtures("stalled_resolver")
def test_a_delivery_to_a_host_whose_name_server_does_not_answer_is_retried_later_in_bounded_time():
    with callback_settings(CALLBACK_CONNECT_TIMEOUT=0.5, CALLBACK_ALLOWED_NETWORKS=[]):
        result, elapsed = timed(deliver, f"https://{STALLED}/hook", b"{}", {})
    assert elapsed < 2, elapsed
    assert (result.delivered, result.status, result.retryable, result.address) == (False, None, True, None)
    assert "did not resolve within" in result.error


@pytest.mark.django_db
@pytest.mark.usefixtures("stalled_resolver")
def test_an_agents_slow_name_server_holds_the_request_no_longer_than_the_connect_timeout(client):
    """The agent chooses the callback's host, and so its name server: the request's worker is held only as long as
    a delivery would wait, and the answer is the protocol's error naming the field, with no job queued."""
    agent, _ = AgentClient.objects.get_or_create(name="Test agent")
    _, secret = ApiKey.objects.issue(agent, scopes=["*"])
    body = {
        "capability": "escalate_to_human",
        "query": "help",
        "context": {"callback_url": f"https://{STALLED}/hook", "accept_types": ["application/data", "text/answer"]},
    }
    with callback_settings(CALLBACK_CONNECT_TIMEOUT=0.5, CALLBACK_ALLOWED_NETWORKS=[]):
        response, elapsed = timed(
            client.post,
            "/agent/converse",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert elapsed < 2, elapsed
    assert response.status_code == 503, response.content  # the site's resolver: try again later
    assert int(response["Retry-After"]) > 0
    assert response.json()["fields"] == ["context.callback_url"]
    assert "did not resolve within" in response.json()["message"]
    assert not Job.objects.exists()
