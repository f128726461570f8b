"""Text PostgreSQL cannot store (NUL bytes, lone UTF-16 surrogates) in what a config gives: the document is written
without them, on save and by agent_reindex, and agents find it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from agent_handshake.models import Document, Passage
from agent_handshake.registry import content_registry
from tests.testapp.agents import ArticleContent
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


class AttachmentContent(ArticleContent):
    """Text as an extractor gives it from an uploaded file: a PDF's text holds NUL bytes, and a title cut from a JSON
    feed mid-emoji holds half of a surrogate pair. The model's own columns could not hold either (PostgreSQL refuses
    them), so they come from the config; ``NUL`` and ``HALF`` in the test's rows stand for them."""

    content_type = "application/feed"
    payload_fields = {"metadata": "attachment_metadata"}

    def get_title(self, obj):
        return obj.title.replace("HALF", "\ud83c")

    def get_summary(self, obj):
        return obj.summary.replace("NUL", "\x00")

    def get_markdown(self, obj):
        return obj.body.replace("NUL", "\x00").replace("HALF", "\udf75")

    def get_payload(self, obj):
        return {"metadata": {"extracted": obj.body.replace("NUL", "\x00"), "pair": "\ud83c\udf75"}}


@pytest.fixture
def attachments(registries):
    content_registry.unregister(Article)
    content_registry.register(Article, AttachmentContent)


def article_document(article: Article) -> Document:
    return Document.objects.get(content_type=ContentType.objects.get_for_model(Article), object_id=str(article.pk))


def test_a_document_with_nul_bytes_and_lone_surrogates_is_written_on_save(attachments, publish, client):
    article = publish(
        Article,
        title="Matcha HALF",
        slug="matcha",
        summary="WhiskNUL it",
        body="Sift the matchaNUL powder before whisking.HALF",
    )
    document = article_document(article)  # before: DataError (NUL) or UnicodeEncodeError, logged, and no document
    assert document.title == "Matcha \ufffd"
    assert document.summary == "Whisk it"
    assert document.markdown == "Sift the matcha powder before whisking.\ufffd"
    assert document.payload["metadata"] == {"extracted": "Sift the matcha powder before whisking.HALF", "pair": "🍵"}
    assert Passage.objects.filter(document=document, text__contains="matcha powder").exists()
    assert "[Matcha \ufffd]" in client.get("/llms.txt").content.decode()
    answer = client.post(
        "/agent/converse",
        {"ahp": "0.1", "capability": "content_search", "query": "How do I sift matcha powder?"},
        content_type="application/json",
    )
    assert answer.status_code == 200
    assert "matcha powder" in answer.content.decode()


def test_agent_reindex_writes_a_document_with_nul_bytes(attachments):
    Article.objects.bulk_create(
        [
            Article(title="Gyokuro", slug="gyokuro", body="Brew at NUL60 degrees."),
            Article(title="Sencha HALF", slug="sencha", body="Brew at 70 degrees."),
        ]
    )
    out = StringIO()
    call_command("agent_reindex", "--model", "testapp.article", stdout=out)
    assert "testapp.article: 2 created, 0 updated, 0 unchanged, 0 deleted; 2 embedded" in out.getvalue()
    assert set(Document.objects.values_list("title", flat=True)) == {"Gyokuro", "Sencha \ufffd"}
    # Unchanged since: the cleaned text's hash is stable, so a second run writes nothing.
    out = StringIO()
    call_command("agent_reindex", "--model", "testapp.article", stdout=out)
    assert "testapp.article: 0 created, 0 updated, 2 unchanged, 0 deleted; 0 embedded" in out.getvalue()
