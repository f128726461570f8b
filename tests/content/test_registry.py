"""The content registry and the capability registry: registration, errors, autodiscovery."""

from __future__ import annotations

import logging

import pytest
from django.apps.registry import Apps
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ImproperlyConfigured
from django.db import models

import agent_handshake
from agent_handshake.models import Document
from agent_handshake.registry import Capability, ContentConfig, NotRegistered
from demo_site.shop.models import Order
from tests.isolated_apps import isolated_model
from tests.testapp.agents import ArticleContent
from tests.testapp.models import Article


def test_autodiscovery_registered_every_agents_module():
    labels = {config.label for config in agent_handshake.content_registry}
    assert labels == {"testapp.article", "blog.post", "pages.page", "videos.video", "shop.product"}
    assert isinstance(agent_handshake.content_registry.get_config(Article), ArticleContent)


def test_register_with_a_class_and_with_the_decorator(registries):
    content, _ = registries
    assert not agent_handshake.is_registered(Order)

    class OrderContent(ContentConfig):
        title_field = "number"

    returned = agent_handshake.register(Order, OrderContent)
    assert returned is OrderContent
    assert agent_handshake.is_registered(Order)
    agent_handshake.unregister(Order)
    assert not agent_handshake.is_registered(Order)

    @agent_handshake.register(Order)
    class DecoratedOrderContent(ContentConfig):
        title_field = "number"

    assert isinstance(content.get_config(Order), DecoratedOrderContent)
    assert content.get_config_by_label("SHOP.Order").model is Order


def test_registering_twice_is_recorded_for_the_system_check(registries):
    content, _ = registries

    class Second(ContentConfig):
        pass

    agent_handshake.register(Article, Second)
    assert isinstance(content.get_config(Article), ArticleContent)  # the first one stays in force
    assert content.duplicates == [(Article, Second)]


def test_register_rejects_what_is_not_a_content_config(registries):
    with pytest.raises(ImproperlyConfigured, match="needs a ContentConfig subclass"):
        agent_handshake.register(Order, object)


def test_unregister_and_lookup_of_unknown_models_raise(registries):
    with pytest.raises(NotRegistered):
        agent_handshake.unregister(Order)
    with pytest.raises(NotRegistered):
        agent_handshake.content_registry.get_config(Order)
    with pytest.raises(NotRegistered):
        agent_handshake.content_registry.get_config_by_label("shop.order")


def test_config_reads_fields_properties_and_methods():
    class Config(ContentConfig):
        title_field = "get_absolute_url"
        body_field = "body"

    article = Article(title="T", slug="s", body="B")
    config = Config(Article)
    assert config.get_title(article) == "/articles/s/"
    assert config.get_markdown(article) == "B"
    assert config.get_summary(article) == ""
    assert ContentConfig(Article).get_title(article) == "T"  # str(obj)
    assert config.get_section() == "Articles"


def test_capability_registry(registries):
    _, capabilities = registries
    capability = Capability(name="quote", description="A quote", mode="MODE2")
    assert agent_handshake.register_capability(capability) is capability
    assert capabilities.get("quote") is capability
    agent_handshake.register_capability(Capability(name="quote", description="Again"))
    assert capabilities.duplicates[-1].description == "Again"
    capabilities.unregister("quote")
    assert capabilities.get("quote") is None
    with pytest.raises(NotRegistered):
        capabilities.unregister("quote")


def test_capability_manifest_entry_carries_mode3_fields():
    schema = {"type": "object", "properties": {"order": {"type": "string"}}}
    capability = Capability(
        name="order_status",
        description="Status of an order",
        mode="MODE3",
        action_type="query",
        input_schema=schema,
        output_schema=schema,
        response_types=["application/data"],
        scope="orders",
    )
    entry = capability.manifest_entry()
    assert entry["action_type"] == "query"
    assert entry["input_schema"] == schema
    assert "scope" not in entry  # not a manifest field (the schema forbids unknown keys)
    assert Capability(name="x", description="y", available=lambda: False).is_available() is False


class Note(isolated_model("MyApp", __name__)):
    """A model of an app whose label is not lower case (``AppConfig.label = "MyApp"``), kept out of the project's
    app registry."""

    title = models.CharField(max_length=100)
    body = models.TextField()


class NoteContent(ContentConfig):
    title_field = "title"
    body_field = "body"


@pytest.fixture
def note_table(create_tables):
    create_tables(Note)


@pytest.mark.django_db
def test_a_model_of_an_app_labelled_in_mixed_case_is_found_and_indexed(registries, note_table, publish, caplog):
    """Django keeps an app label's case (``Note._meta.label_lower`` is "MyApp.note"), and the lookup by label
    lower-cased only the label it was given: the model was never found. Each save's indexing failed with
    NotRegistered (its objects were never answered from), as did ``agent_reindex --model MyApp.note``."""
    content, _ = registries
    agent_handshake.register(Note, NoteContent)
    assert content.get_config_by_label("MyApp.note").model is Note
    assert content.get_config_by_label("MyApp.Note").model is Note  # Model._meta.label
    assert content.get_config_by_label("myapp.note").model is Note  # typed in another case: no other app is "myapp"
    with caplog.at_level(logging.ERROR, logger="agent_handshake"):
        note = publish(Note, title="Matcha", body="Whisk matcha in a zigzag until it foams.")
    assert [record.getMessage() for record in caplog.records] == []
    content_type = ContentType.objects.get_for_model(Note)
    assert Document.objects.filter(content_type=content_type, object_id=str(note.pk)).exists()

    # Two apps whose labels differ only in case: Django's label tells them apart, another case does not.
    twin = type(
        "Note",
        (models.Model,),
        {"__module__": __name__, "Meta": type("Meta", (), {"app_label": "myapp", "apps": Apps()})},
    )
    agent_handshake.register(twin, NoteContent)
    assert content.get_config_by_label("MyApp.note").model is Note
    assert content.get_config_by_label("myapp.Note").model is twin
    with pytest.raises(NotRegistered):
        content.get_config_by_label("MYAPP.note")
