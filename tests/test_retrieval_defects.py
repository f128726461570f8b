"""Retrieval and indexing defects, each with the test that failed before its fix."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_handshake.models import LexemeStat, Passage
from tests.testapp.models import Article


def recount() -> dict[str, int]:
    """The document frequencies counted again from the passages (what ``refresh_lexeme_stats`` stores)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM {Passage._meta.db_table} "
            "WHERE search_vector IS NOT NULL')"
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_removing_passages_stores_no_negative_or_empty_statistics(publish, django_capture_on_commit_callbacks):
    """Taking a passage's lexemes out of the statistics inserted a row of minus its count for a lexeme the
    statistics lacked (they drift until ``agent_reindex`` rebuilds them), and left a row of 0 for a lexeme no passage
    holds any more. Now a lexeme the statistics lack stays out, and one whose last passage goes leaves them."""
    publish(Article, title="Kettles", slug="kettles", body="Descale a zanzibarian kettle with citric acid.")
    publish(Article, title="Teapots", slug="teapots", body="Warm the kettle, then brew oolong.")
    assert LexemeStat.objects.get(lexeme="kettl").passages == 2
    LexemeStat.objects.filter(lexeme="zanzibarian").delete()
    with django_capture_on_commit_callbacks(execute=True):
        Article.objects.get(slug="kettles").delete()
    assert not LexemeStat.objects.filter(passages__lte=0).exists(), list(
        LexemeStat.objects.filter(passages__lte=0).values_list("lexeme", "passages")
    )
    assert dict(LexemeStat.objects.values_list("lexeme", "passages")) == recount()
    assert LexemeStat.objects.get(lexeme="kettl").passages == 1
