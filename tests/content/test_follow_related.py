"""``ContentConfig.follow``: the documents of a registered model show related objects (an essay's writer, its shelf
and the shelf's parent), so a save or delete of those re-indexes the registered objects that reach them. Before,
only the registered model's own saves and many-to-many changes did: renaming a writer left every essay's markdown
with the old name until each essay was saved again or ``agent_reindex`` ran."""

from __future__ import annotations

import logging

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import models
from django.test import override_settings

import agent_handshake
from agent_handshake.checks.registrations import check_registry
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig
from tests.isolated_apps import isolated_model

pytestmark = pytest.mark.django_db


ShelvesModel = isolated_model("shelves", __name__)


class Writer(ShelvesModel):
    name = models.CharField(max_length=100)


class StaffWriter(Writer):
    """A proxy of the followed model: saving it writes the Writer row."""

    class Meta(ShelvesModel.Meta):
        proxy = True


class GuestWriter(Writer):
    """A child of multi-table inheritance of the followed model: saving it writes a Writer row too."""

    visiting_from = models.CharField(max_length=100, blank=True)


class Shelf(ShelvesModel):
    name = models.CharField(max_length=100)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")


class Essay(ShelvesModel):
    title = models.CharField(max_length=100)
    body = models.TextField(blank=True)
    published = models.BooleanField(default=True)
    writer = models.ForeignKey(Writer, on_delete=models.CASCADE, related_name="essays")
    shelf = models.ForeignKey(Shelf, null=True, blank=True, on_delete=models.SET_NULL, related_name="essays")


class EssayContent(ContentConfig):
    title_field = "title"
    follow = ("writer", "shelf", "shelf__parent")

    def get_queryset(self):
        return Essay.objects.filter(published=True).select_related("writer", "shelf__parent")

    def get_markdown(self, essay):
        place = " / ".join(shelf.name for shelf in (essay.shelf and essay.shelf.parent, essay.shelf) if shelf)
        return f"By {essay.writer.name}. Shelved under: {place or 'nothing'}.\n\n{essay.body}"


class GuestColumn(ShelvesModel):
    title = models.CharField(max_length=100)
    guest = models.ForeignKey(GuestWriter, on_delete=models.CASCADE, related_name="columns")


class GuestColumnContent(ContentConfig):
    title_field = "title"
    follow = ("guest",)

    def get_markdown(self, column):
        return f"Guest: {column.guest.name}"


@pytest.fixture
def essay_tables(registries, create_tables):
    create_tables(Writer, GuestWriter, Shelf, Essay)
    agent_handshake.register(Essay, EssayContent)


def markdown() -> dict[str, str]:
    """The markdown of each essay's document, by title."""
    documents = Document.objects.filter(content_type=ContentType.objects.get_for_model(Essay))
    return dict(documents.values_list("title", "markdown"))


def test_renaming_a_writer_rewrites_the_markdown_of_their_essays(essay_tables, commit):
    ines = commit(Writer.objects.create, name="Ines Park")
    other = commit(Writer.objects.create, name="Tomas Vey")
    commit(Essay.objects.create, title="Sencha", body="Steamed.", writer=ines)
    commit(Essay.objects.create, title="Draft", body="Not yet.", writer=ines, published=False)
    commit(Essay.objects.create, title="Puerh", body="Aged.", writer=other)
    assert markdown()["Sencha"].startswith("By Ines Park.")

    ines.name = "Ines Park-Lee"
    commit(ines.save)
    documents = markdown()
    assert documents["Sencha"].startswith("By Ines Park-Lee.")
    assert documents["Puerh"].startswith("By Tomas Vey.")
    assert "Draft" not in documents  # not in the config's queryset: no document


def test_a_deep_path_follows_the_shelf_of_the_shelf(essay_tables, commit):
    writer = commit(Writer.objects.create, name="Ines Park")
    teas = commit(Shelf.objects.create, name="Teas")
    green = commit(Shelf.objects.create, name="Green", parent=teas)
    commit(Essay.objects.create, title="Sencha", writer=writer, shelf=green)
    assert "Shelved under: Teas / Green." in markdown()["Sencha"]

    teas.name = "Camellia"
    commit(teas.save)
    assert "Shelved under: Camellia / Green." in markdown()["Sencha"]


def test_deleting_a_shelf_set_null_rewrites_the_essays_that_were_on_it(essay_tables, commit):
    """SET_NULL: Django empties the essays' shelf with one UPDATE, without their signals."""
    writer = commit(Writer.objects.create, name="Ines Park")
    teas = commit(Shelf.objects.create, name="Teas")
    green = commit(Shelf.objects.create, name="Green", parent=teas)
    commit(Essay.objects.create, title="Sencha", writer=writer, shelf=green)
    commit(Essay.objects.create, title="Tea in general", writer=writer, shelf=teas)

    commit(teas.delete)  # green's parent is emptied too, and the essay on it showed that parent
    documents = markdown()
    assert "Shelved under: Green." in documents["Sencha"]
    assert "Shelved under: nothing." in documents["Tea in general"]


def test_deleting_a_writer_cascade_removes_the_documents_of_their_essays(essay_tables, commit):
    ines = commit(Writer.objects.create, name="Ines Park")
    other = commit(Writer.objects.create, name="Tomas Vey")
    commit(Essay.objects.create, title="Sencha", writer=ines)
    commit(Essay.objects.create, title="Puerh", writer=other)

    commit(ines.delete)
    assert list(markdown()) == ["Puerh"]


def test_saves_through_a_proxy_or_a_child_of_the_followed_model(essay_tables, commit):
    guest = commit(GuestWriter.objects.create, name="Ama Osei", visiting_from="Accra")
    staff = commit(Writer.objects.create, name="Ines Park")
    commit(Essay.objects.create, title="Hibiscus", writer_id=guest.pk)
    commit(Essay.objects.create, title="Sencha", writer=staff)

    guest.name = "Ama Osei-Bonsu"
    commit(guest.save)  # the child's save writes the Writer row the essay shows
    proxied = StaffWriter.objects.get(pk=staff.pk)
    proxied.name = "Ines Park-Lee"
    commit(proxied.save)
    documents = markdown()
    assert documents["Hibiscus"].startswith("By Ama Osei-Bonsu.")
    assert documents["Sencha"].startswith("By Ines Park-Lee.")


def test_a_parent_row_saved_as_the_parent_re_indexes_what_follows_its_child(registries, create_tables, commit):
    """A path to a multi-table child (a GuestWriter): saving its Writer row as a Writer changes what it shows."""
    create_tables(Writer, GuestWriter, GuestColumn)
    agent_handshake.register(GuestColumn, GuestColumnContent)
    guest = commit(GuestWriter.objects.create, name="Ama Osei")
    column = commit(GuestColumn.objects.create, title="Hibiscus", guest=guest)
    row = Writer.objects.get(pk=guest.pk)
    row.name = "Ama Osei-Bonsu"
    commit(row.save)
    document = Document.objects.get(content_type=ContentType.objects.get_for_model(GuestColumn))
    assert document.object_id == str(column.pk)
    assert document.markdown == "Guest: Ama Osei-Bonsu"


def test_a_new_followed_object_queues_nothing(essay_tables, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        Writer.objects.create(name="Nobody yet")
    assert callbacks == []


@pytest.mark.parametrize(
    ("follow", "problem"),
    [
        (("auther",), "EssayContent.follow names 'auther'"),
        (("title",), "EssayContent.follow names 'title'"),
        (("shelf__colour",), "EssayContent.follow names 'shelf__colour'"),
        ("writer", "EssayContent.follow is 'writer'"),
    ],
)
def test_a_path_that_is_not_a_relation_path_is_a_check_error(essay_tables, follow, problem):
    agent_handshake.unregister(Essay)

    class BadEssayContent(EssayContent):
        pass

    BadEssayContent.__name__ = "EssayContent"
    BadEssayContent.follow = follow
    agent_handshake.register(Essay, BadEssayContent)
    errors = [error for error in check_registry() if error.id == "agent_handshake.E018"]
    assert len(errors) == 1, errors
    assert problem in errors[0].msg
    assert "shelves.Essay" in errors[0].msg
    with pytest.raises(SystemCheckError, match=r"agent_handshake\.E018"):
        call_command("check")


def test_good_paths_pass_the_check(essay_tables):
    assert [error for error in check_registry() if error.id == "agent_handshake.E018"] == []


def test_celery_mode_queues_the_essays_in_one_batch_and_indexes_nothing_in_the_request(
    essay_tables, commit, celery_app, tmp_path
):
    writer = commit(Writer.objects.create, name="Ines Park")
    for number in range(3):
        commit(Essay.objects.create, title=f"Essay {number}", writer=writer)
    before = markdown()

    celery_app(
        broker_url="filesystem://",
        broker_transport_options={"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)},
    )
    writer.name = "Ines Park-Lee"
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        commit(writer.save)
    assert markdown() == before
    messages = [path.read_bytes() for path in tmp_path.iterdir()]
    assert len(messages) == 1  # one agent_handshake.index_objects per FOLLOW_BATCH_SIZE essays
    assert b"agent_handshake.index_objects" in messages[0]


def test_celery_mode_with_an_unreachable_broker_indexes_in_the_process(
    essay_tables, commit, celery_app, closed_port, caplog
):
    writer = commit(Writer.objects.create, name="Ines Park")
    commit(Essay.objects.create, title="Sencha", writer=writer)
    celery_app(
        broker_url=f"amqp://guest:guest@127.0.0.1:{closed_port}//",
        broker_connection_timeout=1,
        task_publish_retry_policy={"max_retries": 0},
    )
    writer.name = "Ines Park-Lee"
    with (
        override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}),
        caplog.at_level(logging.WARNING, logger="agent_handshake.signal_handlers"),
    ):
        commit(writer.save)
    assert markdown()["Sencha"].startswith("By Ines Park-Lee.")
    assert any("Could not queue" in record.getMessage() for record in caplog.records)


def test_sync_mode_indexes_a_bounded_number_in_the_request_and_says_what_is_left(
    essay_tables, commit, monkeypatch, caplog
):
    from agent_handshake import signal_handlers

    writer = commit(Writer.objects.create, name="Ines Park")
    for number in range(5):
        commit(Essay.objects.create, title=f"Essay {number}", writer=writer)
    monkeypatch.setattr(signal_handlers, "FOLLOW_SYNC_LIMIT", 2)
    writer.name = "Ines Park-Lee"
    with caplog.at_level(logging.WARNING, logger="agent_handshake.signal_handlers"):
        commit(writer.save)
    renamed = [title for title, text in markdown().items() if text.startswith("By Ines Park-Lee.")]
    assert len(renamed) == 2
    (record,) = [r for r in caplog.records if "agent_reindex" in r.getMessage()]
    assert record.getMessage().startswith("3 objects of shelves.essay ")


class WriterContent(ContentConfig):
    """A writer's page lists their essays: it follows them the other way, through the reverse relation."""

    title_field = "name"
    follow = ("essays",)

    def get_url(self, writer):
        return f"/writers/{writer.pk}/"

    def get_markdown(self, writer):
        return ", ".join(sorted(essay.title for essay in writer.essays.all())) or "No essays."


def test_a_reverse_path_follows_new_saved_and_deleted_objects(essay_tables, commit):
    agent_handshake.register(Writer, WriterContent)
    writer = commit(Writer.objects.create, name="Ines Park")
    sencha = commit(Essay.objects.create, title="Sencha", writer=writer)  # new, and it already reaches its writer
    commit(Essay.objects.create, title="Bancha", writer=writer)

    def page() -> str:
        return Document.objects.get(content_type=ContentType.objects.get_for_model(Writer)).markdown

    assert page() == "Bancha, Sencha"
    sencha.title = "Sencha, steamed"
    commit(sencha.save)
    assert page() == "Bancha, Sencha, steamed"
    commit(sencha.delete)
    assert page() == "Bancha"
