"""BM25 on the full-text side, checked against scores computed by hand on a corpus of three passages.

The corpus (english configuration: "with" is a stop word, "kettle" stems to "kettl"):

    A  title "Kettle"  text "Oolong oolong oolong."   -> kettl (title) 1, oolong 3;       length 4
    B  title "Teapot"  text "Oolong with sencha."     -> teapot (title) 1, oolong, sencha; length 3
    C  title "Cup"     text "Sencha sencha."          -> cup (title) 1, sencha 2;          length 3

N = 3 passages, average length 10/3, k1 = 1.2, b = 0.75, a title occurrence weighs 2.

"oolong": df 2, idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6 = 0.4700036
    A: tf 3, length 4: 0.4700036 * 3 * 2.2 / (3 + 1.2 * (0.25 + 0.75 * 4 / (10/3))) = 0.4700036 * 6.6 / 4.38 = 0.7082246
    B: tf 1, length 3: 0.4700036 * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / (10/3))) = 0.4700036 * 2.2 / 2.11 = 0.4900512
"kettle": df 1, idf = ln(1 + 2.5 / 1.5) = 0.9808293
    A: tf 2 (one title occurrence, weight 2):  0.9808293 * 2 * 2.2 / (2 + 1.38) = 1.2768193
"""

from __future__ import annotations

import pytest
from django.db import connection

from agent_handshake.models import Passage, Posting
from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(publish):
    articles = {
        "a": publish(Article, title="Kettle", slug="a", body="Oolong oolong oolong."),
        "b": publish(Article, title="Teapot", slug="b", body="Oolong with sencha."),
        "c": publish(Article, title="Cup", slug="c", body="Sencha sencha."),
    }
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")  # N comes from the table's statistics
    return {key: Passage.objects.get(document__url=article.get_absolute_url()) for key, article in articles.items()}


def scores(query: str) -> dict[int, float]:
    retriever = HybridRetriever()
    terms = retriever.query_terms(query)
    return dict(retriever.bm25(terms, [terms], Filters(), 10))


def test_postings_count_each_lexeme_by_field_and_the_passage_length(corpus):
    rows = {
        (posting.lexeme, posting.in_title, posting.in_heading, posting.in_text, posting.length)
        for posting in Posting.objects.filter(passage=corpus["a"])
    }
    assert rows == {("kettl", 1, 0, 0, 4), ("oolong", 0, 0, 3, 4)}
    assert [corpus[key].length for key in "abc"] == [4, 3, 3]


@pytest.fixture
def classic_bm25(settings):
    """The parameters the scores above were computed with (the defaults are tuned: README, BM25_K1)."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "BM25_K1": 1.2, "BM25_B": 0.75}


def test_bm25_scores_are_the_hand_computed_ones(corpus, classic_bm25):
    oolong = scores("oolong")
    assert oolong == {corpus["a"].pk: pytest.approx(0.7082246), corpus["b"].pk: pytest.approx(0.4900512)}
    assert scores("kettle") == {corpus["a"].pk: pytest.approx(1.2768193)}
    # Both words: the sum of each word's part, and the ranking follows it.
    both = scores("oolong kettle")
    assert both[corpus["a"].pk] == pytest.approx(0.7082246 + 1.2768193)
    assert list(both) == [corpus["a"].pk, corpus["b"].pk]


def test_bm25_parameters_come_from_the_settings(corpus, settings):
    """k1 = 1.5, b = 1 (full length normalisation): "oolong" in A: 0.4700036 * 3 * 2.5 / (3 + 1.5 * 4 / (10/3))
    = 3.525027 / 4.8; in B: 0.4700036 * 2.5 / (1 + 1.5 * 3 / (10/3)) = 1.175009 / 2.35."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "BM25_K1": 1.5, "BM25_B": 1.0}
    assert scores("oolong") == {corpus["a"].pk: pytest.approx(0.7343806), corpus["b"].pk: pytest.approx(0.5000038)}


def test_deleting_a_passage_deletes_its_postings(corpus, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        Article.objects.filter(slug="a").delete()
    assert not Posting.objects.filter(passage_id=corpus["a"].pk).exists()
    assert Posting.objects.filter(passage=corpus["b"]).count() == 3
