"""Two index runs of one document at once, on two real database connections: one result, exact statistics.

The test's own connection holds every full-text statistics row (``FOR UPDATE``) while both runs start, so both
reach the point where they write the statistics before either can go on; it lets go once both are waiting.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections, transaction

from agent_handshake.indexing import sync_and_index
from agent_handshake.models import Document, LexemeStat, Passage
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


def indexing_thread(article: Article, errors: list[BaseException]) -> threading.Thread:
    """A thread that indexes ``article`` on its own connection, its exception (if any) in ``errors``."""

    def index() -> None:
        try:
            sync_and_index("testapp", "article", str(article.pk))
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    return threading.Thread(target=index)


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
