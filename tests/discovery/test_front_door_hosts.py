"""The base URL the front doors emit when ``BASE_URL`` is unset: NLWeb's result URLs and site warning, ASP's
``agent_id``, MCP's ``resource_metadata`` challenge and its metadata document, IntentWeb's ``actor_id`` in every
signed reply. It follows the discovery documents' rule (tests/discovery/test_hosts.py): the host as
``ALLOWED_HOSTS`` checked it (lowercased, no trailing dot), and a port only where the server listens, so a client
writing ``Host: agents.example:31337`` gets no link to a port of its choosing.

And ``POST /intent`` with a site key that does not load: a JSON 503 ``site_key_unavailable``, before anything is
stored (no interaction, no nonce spent), instead of a 500 HTML page."""

from __future__ import annotations

import json

import pytest
import yaml
from django.test import Client

from agent_handshake.models import IntentNonce, Interaction
from tests.asp import test_asp
from tests.conftest import SERVED_HOST
from tests.identity.test_verified_agents import Agent as VerifiedAgent
from tests.intentweb.test_intentweb import Agent as IntentAgent
from tests.nlweb.test_nlweb import ask

pytestmark = pytest.mark.django_db

HOST = SERVED_HOST
#: (Host header, SERVER_PORT, the base every door must emit): a port the client made up gives way to the server's,
#: however the host is spelled; the server's own port is kept.
CASES = [
    (f"{HOST}:31337", "80", f"http://{HOST}"),
    ("AGENTS.Example.:31337", "80", f"http://{HOST}"),
    (f"{HOST}:31337", "8000", f"http://{HOST}:8000"),
    (f"{HOST}:8000", "8000", f"http://{HOST}:8000"),
]
CLIENT_PORT = "31337"


class Door(Client):
    """A client whose every request comes with ``Host: host`` to a server on ``port`` (Client's own defaults cannot
    set SERVER_PORT: each request sets it from ``secure``)."""

    def __init__(self, host: str, port: str) -> None:
        super().__init__(HTTP_HOST=host)
        self.port = port

    def request(self, **request):
        return super().request(**{**request, "SERVER_PORT": self.port})


door = Door


def no_client_port(body: bytes | str, base: str) -> None:
    text = body if isinstance(body, str) else body.decode()
    if not base.endswith(":" + CLIENT_PORT):
        assert ":" + CLIENT_PORT not in text, text[:500]


# --- NLWeb --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "port", "base"), CASES)
def test_nlweb_results_link_to_where_the_site_is_served(host_site, demo_content, host, port, base):
    client = door(host, port)
    response, body = ask(client, "What does the Dew of Yame Gyokuro cost?", query={"itemType": "Product"})
    assert response.status_code == 200, body
    urls = [result["url"] for result in body["results"]]
    assert urls
    # The demo's URLs are relative: each result is the base plus the page's path.
    assert all(url.startswith(base + "/") for url in urls), urls
    no_client_port(response.content, base)

    # query.site naming another site: the warning names this one by its base's host.
    response, body = ask(client, "green tea", query={"site": "pumpkins-r-us.com"})
    assert response.status_code == 200, body
    (warning,) = body["_meta"]["warnings"]
    assert f"one site, {base.removeprefix('http://')} (" in warning, warning
    no_client_port(response.content, base)


# --- ASP ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "port", "base"), CASES)
def test_asp_agent_id_is_the_served_base(host_site, demo_content, host, port, base):
    agent = test_asp.Agent(Client())  # the handshake on testserver, as test_asp's agent checks it
    agent.handshake()
    answer = test_asp.unframe(test_asp.post(door(host, port), test_asp.frame(agent.hello())).content)
    assert answer.agent_id == base + "/"

    intent = agent.intent("How hot should the water be for gyokuro?", capabilities=["content_search"])
    response = test_asp.post(door(host, port), test_asp.frame(intent))
    assert response.status_code == 200, response.content
    negotiation = test_asp.unframe(response.content)
    assert negotiation.agent_id == base + "/"
    assert negotiation.accepted


@pytest.mark.parametrize(("host", "port", "base"), CASES)
def test_the_ahp_handshake_names_the_served_base(host_site, db, host, port, base):
    """The JSON handshake's answer names the site (``agent_id``) and where to finish (``verify``)."""
    agent = VerifiedAgent(door(host, port))
    response, _ = agent.begin()
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["agent_id"] == base + "/"
    assert answer["verify"].startswith(base + "/")
    no_client_port(response.content, base)


# --- MCP ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "port", "base"), CASES)
def test_mcp_challenge_and_resource_metadata_name_the_served_base(host_site, demo_content, host, port, base):
    client = door(host, port)
    metadata_url = base + "/.well-known/oauth-protected-resource/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "order_status", "arguments": {"query": "x"}}}  # fmt: skip
    # Refused credentials: a 401 whose challenge points at the metadata.
    response = client.post("/mcp", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION="Bearer x")
    assert response.status_code == 401, response.content
    assert f'resource_metadata="{metadata_url}"' in response["WWW-Authenticate"]
    no_client_port(response["WWW-Authenticate"], base)
    # A tool that needs credentials, called without: a tool error with the same challenge.
    body["params"]["name"] = "book_appointment"
    response = client.post("/mcp", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    assert f'resource_metadata="{metadata_url}"' in response["WWW-Authenticate"]

    metadata = client.get("/.well-known/oauth-protected-resource/mcp")
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == base + "/mcp"
    assert metadata.json()["resource_documentation"] == base + "/.well-known/agent.json"
    no_client_port(metadata.content, base)


# --- IntentWeb ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "port", "base"), CASES)
def test_intentweb_signs_as_the_served_endpoint(host_site, demo_content, host, port, base):
    client = door(host, port)
    manifest = yaml.safe_load(client.get("/intentmanifest.yaml").content)
    assert manifest["contact"]["intent_endpoint"] == base + "/intent"
    # IntentAgent checks every reply's site entry against the manifest's actor_id and key (fetched on this host).
    agent = IntentAgent(client)
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200, reply
    (entry,) = reply["attribution"]["chain"]
    assert entry["actor_id"] == base + "/intent"
    assert Interaction.objects.get(interaction_id=agent.interaction_id).endpoint == base + "/intent"
    no_client_port(json.dumps(reply), base)

    # A refusal (the interaction is over) is signed as the same endpoint.
    status, reply = agent.send("information_request", "And LK-TEA-0002?")
    assert status == 409, reply
    assert reply["attribution"]["chain"][0]["actor_id"] == base + "/intent"


# --- IntentWeb without its key ------------------------------------------------------------------------------------


def assert_site_key_unavailable(response) -> None:
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "error"
    assert body["code"] == "site_key_unavailable"
    assert "signing key" in body["message"]
    assert "garbage" not in response.content.decode()


def test_intent_with_a_broken_site_key_is_a_json_503_that_changes_nothing(client, host_site, demo_content):
    working = dict(host_site.AGENT_HANDSHAKE)
    agent = IntentAgent(client)
    envelope = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    nonces = IntentNonce.objects.count()

    host_site.AGENT_HANDSHAKE = {**working, "SITE_PRIVATE_KEY": "garbage"}
    response = client.post("/intent", json.dumps(envelope), content_type="application/json")
    assert_site_key_unavailable(response)
    assert not Interaction.objects.filter(interaction_id=agent.interaction_id).exists()
    assert IntentNonce.objects.count() == nonces
    # A refusal needs the key too (the error envelope is signed): the same 503, not a 500 page.
    assert_site_key_unavailable(client.post("/intent", "{}", content_type="application/json"))
    assert_site_key_unavailable(client.post("/intent", "not json", content_type="application/json"))
    # The intent page's messages go the same way.
    page = client.post("/intent-ui/message", json.dumps({"message": "Is LK-TEA-0001 in stock?"}),
                       content_type="application/json")  # fmt: skip
    assert_site_key_unavailable(page)
    assert Interaction.objects.count() == 0

    # The key fixed: the very same message (its nonce was not spent) is answered, and signed.
    host_site.AGENT_HANDSHAKE = working
    status, reply = agent.post(envelope)
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert Interaction.objects.filter(interaction_id=agent.interaction_id).exists()


def test_the_503s_are_in_the_openapi_document(client, host_site, demo_content):
    document = client.get("/openapi.json").json()
    for path, method in (("/intent", "post"), ("/intentmanifest.yaml", "get")):
        responses = document["paths"][path][method]["responses"]
        assert "503" in responses, (path, sorted(responses))
        schema = responses["503"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/AHPError"}, schema
    assert "AHPError" in document["components"]["schemas"]
