"""Defects found reviewing retrieval and indexing as a whole, each shown by a test that failed before its fix."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Max
from django.db.models.functions import Length

from agent_handshake.models import Document, LexemeStat
from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
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
