"""A model registered after start-up (in an app's ``ready()`` that runs after ours, a module imported later, a test)
is published as one registered at start-up: its generated capability, ``site_info``'s models, and every document
that lists them (the AHP manifest, llms.txt, MCP ``tools/list``, /openapi.json), at once rather than after
``STATE_TTL``; unregistering it takes them away again. A capability registered or unregistered late is published
at once too."""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings

import agent_handshake
from agent_handshake import checks, state
from agent_handshake.registry import Capability, ContentConfig, capability_registry, content_registry
from tests.testapp.models import Article, Report

pytestmark = pytest.mark.django_db

REFUND = "Refunds for a compiled report are paid within fourteen days of the request, to the card that paid."


class ReportContent(ContentConfig):
    """``application/data``: richer than text, so the model has its own ``get_report`` capability; and pages about
    the site itself, which ``site_info`` answers from."""

    content_type = "application/data"
    schema_type = "Report"
    title_field = "topic"
    body_field = "topic"
    section = "Reports"
    section_description = "Reports compiled for agents."
    site_info = True

    def get_url(self, obj):
        return f"/reports/{obj.job_id}/"

    def get_payload(self, obj):
        return {"data": {"topic": obj.topic, "job_id": obj.job_id}}


@pytest.fixture
def late(registries, settings):
    """The registries as start-up left them, and snapshots kept for an hour: what a document shows after a change
    is then what the change made, not a snapshot that happened to expire. Report is unregistered afterwards (as
    a site would) and the registries restored, so no other test sees it."""
    settings.AGENT_HANDSHAKE = {**django_settings.AGENT_HANDSHAKE, "STATE_TTL": 3600}
    builtin = list(capability_registry.builtin)
    yield registries
    if content_registry.is_registered(Report):
        content_registry.unregister(Report)
    capability_registry.builtin = builtin
    state.invalidate()


def published(client) -> dict:
    """What each document of the site says about the capabilities and the content, as an agent reads it."""
    manifest = client.get("/.well-known/agent.json")
    assert manifest.status_code == 200
    tools = client.post(
        "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), content_type="application/json"
    )
    assert tools.status_code == 200
    openapi = client.get("/openapi.json")
    assert openapi.status_code == 200
    llms_txt = client.get("/llms.txt")
    assert llms_txt.status_code == 200
    return {
        "manifest": {entry["name"]: entry for entry in manifest.json()["capabilities"]},
        "mcp": {tool["name"] for tool in tools.json()["result"]["tools"]},
        "openapi": {
            path.removeprefix("/capabilities/") for path in openapi.json()["paths"] if "/capabilities/" in path
        },
        "llms_txt": llms_txt.content.decode(),
        "etag": manifest["ETag"],
    }


def converse(client, capability: str, query: str):
    body = {"ahp": "0.1", "capability": capability, "query": query}
    return client.post("/agent/converse", json.dumps(body), content_type="application/json")


def warnings_about(name: str) -> list[str]:
    return [message.id for message in checks.check_capabilities() if repr(name) in message.msg]


def test_a_model_registered_after_start_up_gets_what_one_registered_at_start_up_gets(client, late, publish):
    """Only its save and delete receivers were connected: no ``get_report`` (the converse endpoint answered 400
    unknown_capability), ``site_info`` kept answering from the models marked site_info at start-up, and the manifest,
    MCP and /openapi.json, cached under the snapshot's token, went on listing what they listed before."""
    before = published(client)  # each document rendered and cached under the current token
    assert "get_report" not in before["manifest"]
    video = before["manifest"]["get_video"]  # a model registered at start-up with a content type richer than text

    agent_handshake.register(Report, ReportContent)

    generated = capability_registry.get("get_report")
    assert generated is not None
    assert generated.models == ("testapp.report",)
    assert any(generated is own for own in capability_registry.builtin)  # the app's own: W007 does not name it
    assert warnings_about("get_report") == []
    assert "testapp.report" in capability_registry.get("site_info").models
    assert set(capability_registry.get("site_info").models) == {
        config.label for config in content_registry if config.site_info
    }

    after = published(client)
    assert after["etag"] != before["etag"]
    assert after["manifest"]["get_report"] == {
        **video,
        "name": "get_report",
        "description": "Retrieve a report by title, topic or ID.",
        "response_types": ["application/data", "text/answer"],
    }
    assert "get_report" in after["mcp"]
    assert "get_report" in after["openapi"]
    assert after["manifest"].keys() - {"get_report"} == before["manifest"].keys()

    publish(Report, job_id="late-1", topic=REFUND, worker_pid=1)
    publish(Article, title="Refund tea", slug="refund-tea", body=REFUND.replace("report", "tea"))
    assert "## Reports" in client.get("/llms.txt").content.decode()
    response = converse(client, "get_report", "When are refunds for a report paid?")
    assert response.status_code == 200, response.content[:300]
    assert [source["url"] for source in response.json()["response"]["sources"]] == ["/reports/late-1/"]
    response = converse(client, "site_info", "When are refunds for a report paid?")
    assert response.status_code == 200, response.content[:300]
    assert [source["url"] for source in response.json()["response"]["sources"]] == ["/reports/late-1/"]


def test_unregistering_a_model_takes_its_capability_and_its_section_away_at_once(client, late, publish):
    """Unregistering left ``get_report`` registered (answering from a model no longer registered), ``site_info``
    naming it, and llms.txt listing its section until the snapshot expired."""
    site_info = capability_registry.get("site_info")
    agent_handshake.register(Report, ReportContent)
    publish(Report, job_id="late-2", topic=REFUND, worker_pid=1)
    before = published(client)
    assert "get_report" in before["manifest"]
    assert "## Reports" in before["llms_txt"]

    agent_handshake.unregister(Report)

    assert capability_registry.get("get_report") is None
    assert capability_registry.get("site_info") is site_info  # as start-up registered it
    after = published(client)
    assert "get_report" not in after["manifest"]
    assert "get_report" not in after["mcp"]
    assert "get_report" not in after["openapi"]
    assert "## Reports" not in after["llms_txt"]
    response = converse(client, "get_report", "When are refunds for a report paid?")
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_capability"


def test_the_first_model_registered_late_brings_the_content_capabilities(client, late):
    """A site with no registered content has no ``site_info`` or ``content_search`` at start-up: they come with the
    first model, whenever it is registered, and go with the last."""
    for config in list(content_registry):
        agent_handshake.unregister(config.model)
    empty = published(client)["manifest"]
    assert "content_search" not in empty
    assert "site_info" not in empty
    assert "get_video" not in empty

    agent_handshake.register(Report, ReportContent)
    names = published(client)["manifest"].keys()
    assert {"content_search", "site_info", "get_report"} <= names
    assert capability_registry.get("site_info").models == ("testapp.report",)


def test_a_late_model_whose_capability_name_a_site_capability_has_keeps_the_sites(client, late):
    """As at start-up: the site's own capability of that name stays, and W007 names it (no E007 duplicate)."""
    own = agent_handshake.register_capability(
        Capability(name="get_report", description="The site's own report search.", mode="MODE2")
    )
    agent_handshake.register(Report, ReportContent)
    assert capability_registry.get("get_report") is own
    assert capability_registry.duplicates == []
    assert warnings_about("get_report") == ["agent_handshake.W007"]
    agent_handshake.unregister(Report)
    assert capability_registry.get("get_report") is own  # not the app's to take away


def test_a_capability_registered_or_unregistered_late_is_published_at_once(client, late):
    """The manifest, cached under a token that names the capabilities, went on without it until the snapshot
    expired."""
    before = published(client)
    agent_handshake.register_capability(
        Capability(name="tea_of_the_day", description="Today's tea.", mode="MODE1", response_types=["text/answer"])
    )
    assert "tea_of_the_day" in published(client)["manifest"]
    capability_registry.unregister("tea_of_the_day")
    assert published(client)["manifest"].keys() == before["manifest"].keys()
