"""Two index runs of one document at once, on two real database connections: one result, exact statistics.

The test's own connection holds every full-text statistics row (``FOR UPDATE``) while both runs start, so both
reach the point where they write the statistics before either can go on; it lets go once both are waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections, transaction

from agent_handshake.indexing import reindex_model, sync_and_index
from agent_handshake.models import Document, LexemeStat, Passage
from agent_handshake.registry import content_registry
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db(transaction=True)


def lock_waiters() -> int:
    """Backends of the test database waiting for a lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # pg_stat_activity is otherwise frozen per transaction
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def worker(function: Callable[[], object], errors: list[BaseException]) -> Callable[[], None]:
    """``function`` for a thread: on the thread's own connection, its exception (if any) in ``errors``."""

    def run() -> None:
        try:
            function()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    return run


def indexing_thread(article: Article, errors: list[BaseException]) -> threading.Thread:
    """A thread that indexes ``article`` on its own connection, its exception (if any) in ``errors``."""
    return threading.Thread(target=worker(lambda: sync_and_index("testapp", "article", str(article.pk)), errors))


def run_twice_at_once(article: Article) -> list[BaseException]:
    errors: list[BaseException] = []
    threads = [indexing_thread(article, errors) for _ in range(2)]
    with transaction.atomic():
        list(LexemeStat.objects.select_for_update())
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while lock_waiters() < 2:
            assert time.monotonic() < deadline, "the two runs never both waited"
            time.sleep(0.02)
    for thread in threads:
        thread.join(30)
    return errors


def recount() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM {Passage._meta.db_table} "
            "WHERE search_vector IS NOT NULL')"
        )
        return dict(cursor.fetchall())


def statistics() -> dict[str, int]:
    return dict(LexemeStat.objects.filter(passages__gt=0).values_list("lexeme", "passages"))


def documents_of_articles():
    return Document.objects.filter(content_type=ContentType.objects.get_for_model(Article))


def test_two_runs_for_a_changed_document_write_its_passages_once():
    article = Article.objects.create(title="Kettles", slug="kettles", body="Descale the kettle with citric acid.")
    assert statistics() == recount()
    Article.objects.filter(pk=article.pk).update(body="Warm the teapot before brewing gyokuro at sixty degrees.")

    assert run_twice_at_once(article) == []

    document = documents_of_articles().get()
    assert document.indexed_hash == document.content_hash
    passages = list(Passage.objects.filter(document=document).values_list("position", "text"))
    assert len(passages) == len({position for position, _ in passages})
    assert "gyokuro" in passages[0][1]
    assert statistics() == recount()
    assert "gyokuro" in statistics()
    assert "citric" not in statistics()


def test_two_runs_for_a_deleted_object_take_its_lexemes_out_once():
    Article.objects.create(title="Oolong", slug="oolong", body="Rinse oolong leaves once.")
    article = Article.objects.create(title="Kettles", slug="kettles", body="Rinse the kettle with citric acid.")
    Article.objects.filter(pk=article.pk).update(published=False)  # no signal: the runs find it gone

    assert run_twice_at_once(article) == []

    assert documents_of_articles().count() == 1
    assert statistics() == recount()
    assert statistics()["rins"] == 1


def test_a_removal_that_waited_for_the_document_keeps_it_when_its_object_came_back():
    article = Article.objects.create(title="Kettles", slug="kettles", body="Rinse the kettle with citric acid.")
    Article.objects.filter(pk=article.pk).update(published=False)  # the run below finds it gone
    errors: list[BaseException] = []
    thread = indexing_thread(article, errors)  # it finds the article gone: a removal
    with transaction.atomic():
        list(documents_of_articles().select_for_update())  # another run writing the document holds its row
        thread.start()
        deadline = time.monotonic() + 30
        while lock_waiters() < 1:
            assert time.monotonic() < deadline, "the removal never waited"
            time.sleep(0.02)
        Article.objects.filter(pk=article.pk).update(published=True)  # meanwhile it is published again
    thread.join(30)

    assert errors == []
    document = documents_of_articles().get()  # kept: the object is published
    assert Passage.objects.filter(document=document).exists()
    assert statistics() == recount()


def wait_for(waiters: int, *, unless: threading.Thread | None = None) -> None:
    """Until ``waiters`` backends wait for a lock (or ``unless`` has ended: it took no lock that waits)."""
    deadline = time.monotonic() + 30
    while lock_waiters() < waiters and not (unless is not None and not unless.is_alive()):
        assert time.monotonic() < deadline, f"never {waiters} runs waiting"
        time.sleep(0.02)


def committed(function: Callable[[], object]) -> None:
    """Run ``function`` on a connection of its own, committed at once (the test's connection is in a transaction)."""
    errors: list[BaseException] = []
    thread = threading.Thread(target=worker(function, errors))
    thread.start()
    thread.join(30)
    assert errors == []


def published_while_it_waits(
    removal: threading.Thread, article: Article, errors: list[BaseException], **fields
) -> None:
    """``removal``, a run that finds ``article`` gone, waits to take its lexemes out (the test's connection holds
    them), its mind made up; meanwhile the article is published again (its ``fields`` updated, committed) and that
    save's task starts. Then both go on."""
    with transaction.atomic():
        list(LexemeStat.objects.select_for_update())
        removal.start()
        wait_for(1)
        committed(lambda: Article.objects.filter(pk=article.pk).update(**fields))
        save = indexing_thread(article, errors)  # the publishing save's task
        save.start()
        wait_for(2, unless=save)
    removal.join(30)
    save.join(30)


@pytest.mark.parametrize("body", [None, "Warm the teapot before brewing gyokuro at sixty degrees."])
def test_a_save_while_a_removal_holds_the_document_keeps_it(body):
    """An unpublish's task (a removal) found the object gone and is deleting its document when the object is
    published again and that save's task runs: the later run must leave the document there, current."""
    article = Article.objects.create(title="Kettles", slug="kettles", body="Rinse the kettle with citric acid.")
    Article.objects.filter(pk=article.pk).update(published=False)  # no signal: the task runs below
    errors: list[BaseException] = []
    published = {"published": True} if body is None else {"published": True, "body": body}
    published_while_it_waits(indexing_thread(article, errors), article, errors, **published)

    assert errors == []
    document = documents_of_articles().get()
    assert document.indexed_hash == document.content_hash
    assert ("gyokuro" in document.markdown) is (body is not None)
    assert Passage.objects.filter(document=document).exists()
    assert statistics() == recount()


def test_a_save_while_agent_reindex_removes_the_document_keeps_it():
    """agent_reindex removing the document of an object it found gone, while the object is published again."""
    article = Article.objects.create(title="Kettles", slug="kettles", body="Rinse the kettle with citric acid.")
    Article.objects.filter(pk=article.pk).update(published=False)  # no signal: agent_reindex finds it gone
    errors: list[BaseException] = []
    config = content_registry.get_config(Article)
    reindex = threading.Thread(target=worker(lambda: reindex_model(config), errors))
    published_while_it_waits(reindex, article, errors, published=True)

    assert errors == []
    document = documents_of_articles().get()
    assert Passage.objects.filter(document=document).exists()
    assert statistics() == recount()


def test_agent_reindex_writes_no_document_for_an_object_unpublished_while_it_ran():
    """agent_reindex read an object before it was unpublished (and changed), and that save's task removed its
    document before the run came to it: the run must not write the document back."""
    first = Article.objects.create(title="Oolong", slug="oolong", body="Rinse oolong leaves once.")
    article = Article.objects.create(title="Kettles", slug="kettles", body="Rinse the kettle with citric acid.")
    Article.objects.filter(pk__in=[first.pk, article.pk]).update(body="Descale it with citric acid.")  # both stale
    errors: list[BaseException] = []
    config = content_registry.get_config(Article)
    reindex = threading.Thread(target=worker(lambda: reindex_model(config), errors))
    with transaction.atomic():
        list(documents_of_articles().filter(object_id=str(first.pk)).select_for_update())
        reindex.start()  # it reads both objects, then waits to write the first one's document
        wait_for(1)
        committed(lambda: Article.objects.filter(pk=article.pk).update(published=False, body="Withdrawn."))
        removal = indexing_thread(article, errors)  # the unpublishing save's task
        removal.start()
        removal.join(30)
    reindex.join(30)

    assert errors == []
    assert list(documents_of_articles().values_list("object_id", flat=True)) == [str(first.pk)]
    assert statistics() == recount()
