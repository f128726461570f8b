"""A registered model's primary key may be any text Django allows (a slug or a URL of up to 255 characters, a
CharField without max_length on PostgreSQL): its objects are indexed, found by the markdown versions, and removed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection, models

import agent_handshake
from agent_handshake.indexing import reindex_model
from agent_handshake.models import Document, Passage
from agent_handshake.registry import ContentConfig
from tests.isolated_apps import isolated_model

pytestmark = pytest.mark.django_db


class Guide(isolated_model("guides", __name__)):
    """A model whose primary key is its URL, as a site importing pages keyed by address would have; kept out of the
    project's app registry."""

    url = models.CharField(primary_key=True, max_length=255)
    title = models.CharField(max_length=100)
    body = models.TextField()

    def get_absolute_url(self):
        return self.url


class GuideContent(ContentConfig):
    title_field = "title"
    body_field = "body"


@pytest.fixture
def guides(registries, create_tables):
    create_tables(Guide)
    agent_handshake.register(Guide, GuideContent)


LONG_URL = "/guides/" + "-".join(["brewing-green-tea-at-lower-temperatures"] * 6) + "/"  # 247 characters


def documents(pk: str):
    return Document.objects.filter(content_type=ContentType.objects.get_for_model(Guide), object_id=pk)


def test_an_object_whose_primary_key_is_longer_than_64_characters_is_indexed(
    guides, publish, client, django_capture_on_commit_callbacks
):
    """object_id held 64 characters: the save's indexing failed (logged) and agent_reindex named the object as
    failed on every run, so a model keyed by a long slug or URL was never seen by agents."""
    assert 64 < len(LONG_URL) <= 255
    guide = publish(Guide, url=LONG_URL, title="Cooler water", body="Green tea brewed at 70 °C is sweeter.")
    assert documents(guide.pk).get().title == "Cooler water"
    assert Passage.objects.filter(document__object_id=LONG_URL, text__contains="sweeter").exists()

    # agent_reindex finds it current, and a change made without signals is caught up, not reported as failed.
    Guide.objects.filter(pk=LONG_URL).update(title="Cooler water, sweeter tea")
    counts = reindex_model(agent_handshake.content_registry.get_config(Guide))
    assert counts == {"created": 0, "updated": 1, "unchanged": 0, "deleted": 0, "failed": 0}
    out = StringIO()
    call_command("agent_reindex", "--model", "guides.guide", stdout=out)
    assert "guides.guide: 0 created, 0 updated, 1 unchanged, 0 deleted" in out.getvalue()

    # The markdown version of its page is served from the document.
    response = client.get(LONG_URL.rstrip("/") + ".md")
    assert response.status_code == 200, response.content[:300]
    assert "Cooler water, sweeter tea" in response.content.decode()

    # Deleting the object removes its document.
    with django_capture_on_commit_callbacks(execute=True):
        guide.delete()
    assert not documents(LONG_URL).exists()


class Entry(isolated_model("entries", __name__)):
    """PostgreSQL lets a CharField have no max_length, so any text can be a primary key."""

    key = models.CharField(primary_key=True)
    title = models.CharField(max_length=100)


def test_a_primary_key_of_a_charfield_without_max_length_is_indexed(registries, create_tables, publish, commit):
    create_tables(Entry)
    agent_handshake.register(Entry, type("EntryContent", (ContentConfig,), {"title_field": "title"}))
    key = "archive-" + "x" * 1000
    entry = publish(Entry, key=key, title="Archive")
    content_type = ContentType.objects.get_for_model(Entry)
    assert Document.objects.filter(content_type=content_type, object_id=key).get().title == "Archive"
    commit(entry.delete)
    assert not Document.objects.filter(content_type=content_type).exists()


def test_the_migration_keeps_every_stored_object_id():
    """0018 widens the column in place (varchar(64) to text, no rewrite of the ids): documents written before it
    keep their ids, and so their objects keep their documents (and passages)."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    before = executor.loader.project_state(("agent_handshake", "0017_interaction_actor_and_version"))
    after = executor.loader.project_state(("agent_handshake", "0018_document_object_id_text"))
    migration = executor.loader.get_migration("agent_handshake", "0018_document_object_id_text")
    (operation,) = migration.operations
    with connection.schema_editor() as editor:
        operation.database_backwards("agent_handshake", editor, after, before)
    old = before.apps.get_model("agent_handshake", "Document")
    content_type = ContentType.objects.get_for_model(Guide)
    ids = ["1", "a" * 64, "/guides/oolong/"]
    for object_id in ids:
        old.objects.create(
            content_type_id=content_type.pk, object_id=object_id, url=object_id, path=object_id, title=object_id
        )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the foreign keys' checks, or the table cannot be altered
    with connection.schema_editor() as editor:
        operation.database_forwards("agent_handshake", editor, before, after)
    assert sorted(Document.objects.values_list("object_id", flat=True)) == sorted(ids)
    Document.objects.create(content_type=content_type, object_id=LONG_URL, url=LONG_URL, path=LONG_URL, title="Long")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = %s AND column_name = 'object_id'",
            [Document._meta.db_table],
        )
        assert cursor.fetchone() == ("text",)
