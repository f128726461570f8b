"""Two registrations of one table (a model and its proxy, or two proxies of one model) are refused by a system
check: their documents, passages and content signals are all keyed by the table's model (its content type), so
``agent_reindex`` of one deleted the documents of the other's objects outside its queryset, and a save of an object
indexed it as one of them only. Content vanished from answers, llms.txt and MCP without a word."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps.registry import Apps
from django.core.checks import Error
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import models

import agent_handshake
from agent_handshake import checks
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig, content_registry
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


class Isolated:
    """The ``Meta`` of testapp's models here: kept out of the project's app registry (and its migrations)."""

    app_label = "testapp"
    apps = Apps()


class PublishedArticle(Article):
    """The common pattern: a proxy with its own queryset, registered instead of the model."""

    class Meta(Isolated):
        proxy = True


class FeaturedArticle(Article):
    class Meta(Isolated):
        proxy = True


class ReviewArticle(Article):
    """A child of multi-table inheritance: a table of its own, so a content type of its own."""

    verdict = models.CharField(max_length=20)

    class Meta(Isolated):
        pass


class PublishedArticleContent(ContentConfig):
    title_field = "title"
    body_field = "body"
    section = "Published articles"

    def get_queryset(self):
        return PublishedArticle.objects.filter(published=True, slug__startswith="tea-")


def shared_table_errors() -> list[Error]:
    return [message for message in checks.check_registry() if message.id == "agent_handshake.E017"]


def test_a_model_registered_beside_its_proxy_is_an_error(registries, publish):
    """``agent_reindex`` of the proxy deleted the model's documents of every article outside the proxy's queryset
    (here the coffee one), then the model's run wrote them back, and so on: which of them agents saw depended on
    the order of the runs. Now ``manage.py check`` names both registrations and says what to do."""
    publish(Article, title="Sencha", slug="tea-sencha", body="Steamed green tea.")
    publish(Article, title="Espresso", slug="coffee-espresso", body="Not tea.")
    stored = sorted(Document.objects.values_list("title", flat=True))
    agent_handshake.register(PublishedArticle, PublishedArticleContent)

    errors = shared_table_errors()
    assert len(errors) == 1
    assert "testapp.Article" in errors[0].msg
    assert "testapp.PublishedArticle" in errors[0].msg
    assert "one registration" in errors[0].hint.lower()
    with pytest.raises(SystemCheckError, match=r"agent_handshake\.E017"):
        call_command("check", stdout=StringIO(), stderr=StringIO())
    # The check only reports: nothing stored goes.
    assert sorted(Document.objects.values_list("title", flat=True)) == stored


def test_two_proxies_of_one_model_are_an_error(registries):
    content_registry.unregister(Article)
    agent_handshake.register(PublishedArticle, PublishedArticleContent)
    agent_handshake.register(FeaturedArticle, ContentConfig)
    errors = shared_table_errors()
    assert len(errors) == 1
    assert "testapp.PublishedArticle" in errors[0].msg
    assert "testapp.FeaturedArticle" in errors[0].msg


def test_a_proxy_alone_or_a_child_beside_its_parent_is_fine(registries):
    content_registry.unregister(Article)
    agent_handshake.register(PublishedArticle, PublishedArticleContent)
    assert shared_table_errors() == []
    agent_handshake.register(ReviewArticle, ContentConfig)  # its own table: its own documents
    assert shared_table_errors() == []
