"""A site that registers only a proxy of its model (``PublishedArticle(Article)`` with its own queryset, the common
way to show agents some rows) is served like any other registration. Its documents and passages carry the model's
content type (``ContentType.objects.get_for_model`` gives a proxy its concrete model's), so its answers, sections,
content signals and ``models=`` filters must name it by that label too: by the proxy's own label, retrieval left
every passage out as belonging to no registered model, and agents got "nothing answers this question"."""

from __future__ import annotations

import json

import pytest
from django.contrib.contenttypes.models import ContentType

import agent_handshake
from agent_handshake import checks, state
from agent_handshake.concierge import answering
from agent_handshake.models import ContentSignalOverride, SiteProfile
from agent_handshake.registry import Capability, ContentConfig, content_registry
from tests.content.test_shared_table_registrations import PublishedArticle
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

URL = "/agent/converse"


class PublishedArticleContent(ContentConfig):
    title_field = "title"
    summary_field = "summary"
    body_field = "body"
    section = "Tea notes"

    def get_queryset(self):
        return PublishedArticle.objects.filter(published=True)


@pytest.fixture
def proxy_site(registries, publish):
    """Only the proxy registered, and two articles saved through the model (one of them a draft)."""
    content_registry.unregister(Article)
    agent_handshake.register(PublishedArticle, PublishedArticleContent)
    publish(
        Article,
        title="Cold brewing sencha",
        slug="cold-brew",
        summary="How to cold brew green tea.",
        body="Steep sencha leaves in cold water for eight hours, then strain: cold brewed green tea is sweet.",
    )
    publish(Article, title="Draft", slug="draft", body="Cold brew notes not ready yet.", published=False)


def ask(client, query, capability="content_search", **context):
    body = {"ahp": "0.1", "capability": capability, "query": query, **({"context": context} if context else {})}
    response = client.post(URL, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def source_urls(body) -> list[str]:
    return [source["url"] for source in body["response"]["sources"]]


def test_answers_come_from_the_registered_proxy(proxy_site, client):
    body = ask(client, "How do I cold brew green tea?")
    assert source_urls(body) == ["/articles/cold-brew/"]
    # Its section is the proxy's, found by the label its passages carry.
    assert answering.section_of("testapp.article") == "Tea notes"


def test_the_proxys_section_filters_answers(proxy_site, client):
    body = ask(client, "How do I cold brew green tea?", filters={"sections": ["Tea notes"]})
    assert source_urls(body) == ["/articles/cold-brew/"]
    # Named by its own label, as a site knows it.
    body = ask(client, "How do I cold brew green tea?", filters={"sections": ["testapp.PublishedArticle"]})
    assert source_urls(body) == ["/articles/cold-brew/"]


def test_the_content_signals_of_the_proxys_content_type_apply(proxy_site, client):
    """The admin offers the proxy's content as the content type its documents carry (the model's): an override
    there was never read for the proxy, whose llms.txt section and answers asked for the signals of its own label."""
    assert "## Tea notes" in client.get("/llms.txt").content.decode()
    ContentSignalOverride.objects.create(
        profile=SiteProfile.objects.create(name="Tea"),
        content_type=ContentType.objects.get_for_model(PublishedArticle),
        ai_input=False,
    )
    state.invalidate()  # (the override's own receiver does it when the test's transaction commits, which it never does)
    # Left out of llms.txt, whose one Content-Signal header (the site's) would say ai-input=yes of it.
    assert "## Tea notes" not in client.get("/llms.txt").content.decode()
    assert source_urls(ask(client, "How do I cold brew green tea?")) == []


def test_a_capability_names_the_proxy_by_its_own_label(proxy_site, client):
    capability = agent_handshake.register_capability(
        Capability(
            name="tea_notes",
            description="Answer from the tea notes.",
            models=("testapp.PublishedArticle",),
            handler=answering.content_answer,
        )
    )
    assert capability.models == ("testapp.article",)
    assert not [message for message in checks.check_capabilities() if "tea_notes" in message.msg]
    body = ask(client, "How do I cold brew green tea?", capability="tea_notes")
    assert source_urls(body) == ["/articles/cold-brew/"]
