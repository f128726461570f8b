"""Retrieval and indexing as a whole: a word longer than the lexeme column and a passage too long for a full-text vector
still indexed, and the passages of models no longer registered left out of a search (the last one's too) without
crowding out the registered ones' nearest, until ``agent_reindex`` removes them."""

from __future__ import annotations

import base64
import random
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Max
from django.db.models.functions import Length

from agent_handshake import state
from agent_handshake.models import Document, LexemeStat, Passage
from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
from demo_site.pages.models import Page
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

#: A link whose path is one 320-character token (a tracking link, a signed download): PostgreSQL's parser makes
#: lexemes of up to 2,047 characters, the lexeme columns hold 255.
LONG_LINK = "https://downloads.example.com/" + "a1B2c3D4" * 40


def test_a_word_longer_than_the_lexeme_column_does_not_stop_indexing(publish):
    """The passages of a text holding such a word were never written (the save's indexing failed with "value too
    long for type character varying(255)", logged), and ``agent_reindex`` stopped with that error at the first such
    document, leaving the rest of the site without passages and its statistics unrebuilt."""
    publish(Article, title="Firmware", slug="firmware", body=f"The kettle firmware is at {LONG_LINK} for download.")
    document = Document.objects.get(path="/articles/firmware/")
    assert document.indexed_hash == document.content_hash
    scope = Filters(models=["testapp.article"])
    assert [hit.url for hit in HybridRetriever().search_documents("kettle firmware", filters=scope, mode="text")] == [
        "/articles/firmware/"
    ]
    assert LexemeStat.objects.annotate(size=Length("lexeme")).aggregate(longest=Max("size"))["longest"] <= 255

    Article.objects.create(title="Manual", slug="manual", body=f"The manual: {LONG_LINK}/manual.pdf")
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    assert "Full-text statistics rebuilt" in out.getvalue()
    manual = Document.objects.get(path="/articles/manual/")
    assert manual.indexed_hash == manual.content_hash
    assert HybridRetriever().search_documents("manual", filters=scope, mode="text")[0].url == "/articles/manual/"


def test_an_unregistered_models_passages_do_not_crowd_out_the_registered_ones_nearest(publish, registries):
    """An unregistered model's passages stay until ``agent_reindex`` removes them, and a search leaves them out with
    a clause of its own; but pgvector's iterative scan was switched on only for the request's filters, so on a site
    large enough for the HNSW index the graph's nearest passages (``hnsw.ef_search`` of them), all of the
    unregistered model, were filtered out afterwards and the vector side found nothing."""
    for n in range(100):
        body = f"Our cast-iron kettle number {n} whistles when the water boils."
        publish(Article, title=f"Kettle {n}", slug=f"kettle-{n}", body=body)
    publish(Page, title="Kettle care", slug="kettle-care", body="Descale the kettle every month.")
    content, _ = registries
    content.unregister(Article)
    state.invalidate()  # as the restart that deploys the change would
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")
        cursor.execute("SET enable_seqscan = off")  # the plan of a large site: the HNSW index (rolled back after)
    hits = HybridRetriever().search("a kettle that whistles when the water boils", mode="vector")
    assert [hit.passage.document.path for hit in hits] == ["/kettle-care/"]


def test_a_passage_too_long_for_a_full_text_vector_is_indexed(publish):
    """A passage is at most ``PASSAGE_WORDS`` words, but a word may be any length: an image pasted into the text as a
    data URI (2 MB of base64) made PostgreSQL refuse the passage's full-text vector ("string is too long for
    tsvector"), so the document never got passages and ``agent_reindex`` stopped at it. Its full-text vector now
    reads the passage's first ``MAX_INDEXED_CHARACTERS`` characters."""
    image = base64.b64encode(random.Random(7).randbytes(1_500_000)).decode()
    body = f"Our kettle whistles.\n\n![The kettle](data:image/png;base64,{image})"
    publish(Article, title="Photo", slug="photo", body=body)
    document = Document.objects.get(path="/articles/photo/")
    assert document.indexed_hash == document.content_hash
    scope = Filters(models=["testapp.article"])
    hits = HybridRetriever().search_documents("kettle whistles", filters=scope, mode="text")
    assert [hit.url for hit in hits] == ["/articles/photo/"]

    album_body = f"The tasting room.\n\n![Room](data:image/png;base64,{image})"
    Article.objects.create(title="Album", slug="album", body=album_body)
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    assert "Full-text statistics rebuilt" in out.getvalue()
    album = Document.objects.get(path="/articles/album/")
    assert album.indexed_hash == album.content_hash


def test_agent_reindex_removes_the_documents_when_no_model_is_registered_any_more(publish, registries):
    """A run over every model removes the documents of models no longer registered, except when none is left: it
    stopped at "No models are registered", so the last model's documents, passages and words stayed for good."""
    publish(Article, title="Kettles", slug="kettles", body="Descale a zanzibarian kettle with citric acid.")
    content, _ = registries
    for config in list(content):
        content.unregister(config.model)
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    assert "No models are registered with agent_handshake." in out.getvalue()
    assert "testapp.article: 1 deleted (no longer registered)" in out.getvalue()
    assert not Document.objects.exists()
    assert not Passage.objects.exists()
    assert not LexemeStat.objects.filter(lexeme="zanzibarian").exists()


@pytest.mark.parametrize("mode", ["hybrid", "text", "vector"])
def test_the_passages_of_the_last_model_unregistered_are_not_served(publish, registries, mode):
    """Passages of models no longer registered are left out of a search until agent_reindex removes them, by a
    clause naming the registered models; with none registered there was no clause at all, and every one was served
    (a content gap's nearest page, a search with no model named)."""
    publish(Article, title="Kettles", slug="kettles", body="A cast-iron kettle rusts if water is left in it.")
    content, _ = registries
    for config in list(content):
        content.unregister(config.model)
    state.invalidate()  # as the restart that deploys the change would
    assert HybridRetriever().search("kettle rusts", mode=mode) == []
