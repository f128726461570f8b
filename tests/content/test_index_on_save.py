"""INDEX_ON_SAVE: a save never fails because its indexing cannot be queued, and "auto" works with nothing set up.

Each test gives Celery a project app of its own (as a site's ``proj/celery.py`` would), so the broker a save
talks to is the one the test names: none, or a closed port on 127.0.0.1.
"""

from __future__ import annotations

import logging
import time

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db.models import F, Model
from django.test import override_settings

from agent_handshake.models import Document
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


def indexed(obj: Model) -> bool:
    """The object's document exists and its passages are built from its current content."""
    return Document.objects.filter(
        content_type=ContentType.objects.get_for_model(obj), object_id=str(obj.pk), indexed_hash=F("content_hash")
    ).exists()


def test_save_with_an_unreachable_broker_succeeds_and_is_indexed(
    celery_app, closed_port, django_capture_on_commit_callbacks, caplog
):
    """The admin used to answer 500 (with the row saved) when the broker could not be reached."""
    celery_app(
        broker_url=f"amqp://guest:guest@127.0.0.1:{closed_port}//",
        broker_connection_timeout=1,
        task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.1},
    )
    started = time.monotonic()
    with (
        override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}),
        caplog.at_level(logging.WARNING, logger="agent_handshake.signal_handlers"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        article = Article.objects.create(title="Cold brew", slug="cold-brew", body="Eight hours in the fridge.")
    assert indexed(article)
    assert time.monotonic() - started < 30
    (record,) = [r for r in caplog.records if "Could not queue" in r.getMessage()]
    assert record.exc_info is not None  # the broker's error is in the log, for the operator


def test_auto_indexes_in_the_request_without_a_broker(celery_app, django_capture_on_commit_callbacks):
    """With nothing configured (no CELERY_BROKER_URL), the default indexes on commit in the saving process."""
    from agent_handshake.signal_handlers import index_on_save_mode

    celery_app()
    with override_settings(AGENT_HANDSHAKE={}):
        assert index_on_save_mode() == "sync"
        with django_capture_on_commit_callbacks(execute=True):
            article = Article.objects.create(title="Hojicha", slug="hojicha", body="Roasted green tea.")
    assert indexed(article)


def test_auto_queues_when_the_project_names_a_broker(celery_app, django_capture_on_commit_callbacks, tmp_path):
    """With a broker, the default queues a task on commit (a worker indexes it) and indexes nothing in the request."""
    from agent_handshake.signal_handlers import index_on_save_mode

    celery_app(
        broker_url="filesystem://",
        broker_transport_options={"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)},
    )
    with override_settings(AGENT_HANDSHAKE={}):
        assert index_on_save_mode() == "celery"
        with django_capture_on_commit_callbacks(execute=True):
            article = Article.objects.create(title="Gyokuro", slug="gyokuro", body="Shaded for three weeks.")
    assert not Document.objects.filter(object_id=str(article.pk)).exists()
    messages = list(tmp_path.iterdir())
    assert len(messages) == 1
    assert b"agent_handshake.index_object" in messages[0].read_bytes()


def test_admin_save_with_an_unreachable_broker(
    admin_client, celery_app, closed_port, django_capture_on_commit_callbacks
):
    """What the issue saw: saving a post in the admin while the broker is down."""
    from demo_site.blog.models import Author, Post

    celery_app(
        broker_url=f"amqp://guest:guest@127.0.0.1:{closed_port}//",
        broker_connection_timeout=1,
        task_publish_retry_policy={"max_retries": 0},
    )
    author = Author.objects.create(name="Ines Park", slug="ines-park")
    form = {
        "title": "Cold-brewing sencha overnight",
        "slug": "cold-brew-sencha",
        "author": author.pk,
        "summary": "Ten grams, a litre of cold water, eight hours.",
        "body": "Ten grams of sencha in a litre of cold water, eight hours in the fridge.",
        "status": "published",
        "published_at_0": "2025-06-01",
        "published_at_1": "08:00:00",
    }
    with (
        override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = admin_client.post("/admin/blog/post/add/", form)
    assert response.status_code == 302, response.content[:500]
    assert indexed(Post.objects.get(slug="cold-brew-sencha"))


def test_save_while_the_embedding_server_is_down_is_recovered_by_agent_reindex(
    closed_port, fake_openai, django_capture_on_commit_callbacks, caplog
):
    """Indexing in the request cannot embed: the save still succeeds, the document waits for its passages, and
    `agent_reindex` embeds them once the server is back."""
    from django.core.management import call_command

    from agent_handshake.models import EmbeddingIndex

    EmbeddingIndex.objects.all().delete()  # whatever model an earlier test module left recorded
    embeddings = {
        "INDEX_ON_SAVE": "sync",
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": f"http://127.0.0.1:{closed_port}/v1", "max_retries": 0, "dimensions": 64},
    }
    with (
        override_settings(AGENT_HANDSHAKE=embeddings),
        caplog.at_level(logging.ERROR, logger="agent_handshake.signal_handlers"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        article = Article.objects.create(title="Genmaicha", slug="genmaicha", body="Green tea with roasted rice.")
    assert Document.objects.filter(object_id=str(article.pk)).exists()
    assert not indexed(article)
    assert any("agent_reindex" in record.getMessage() for record in caplog.records)

    embeddings["EMBEDDING_OPTIONS"] = {**embeddings["EMBEDDING_OPTIONS"], "base_url": fake_openai.base_url}
    with override_settings(AGENT_HANDSHAKE=embeddings):
        call_command("agent_reindex", verbosity=0)
    assert indexed(article)


def test_a_passage_over_the_embedding_models_input_limit_is_embedded_with_the_openai_backend(fake_openai):
    """A passage holding a long run without spaces (an image pasted as a data URI) is one "word" to the chunker, so
    its passage was over the embeddings API's 8,192-token input: the server's 400 failed the object's indexing on
    every try, and agent_reindex stopped at it. What is sent to be embedded is now cut to a size every such model
    takes (the stored text and the full-text side are unchanged)."""
    from django.core.management import call_command

    from agent_handshake.models import EmbeddingIndex

    EmbeddingIndex.objects.all().delete()
    embeddings = {
        "INDEX_ON_SAVE": "off",
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": fake_openai.base_url, "max_retries": 0, "dimensions": 64},
    }
    pasted = "data:image/png;base64," + "iVBORw0KGgo" * 20_000
    with override_settings(AGENT_HANDSHAKE=embeddings):
        article = Article.objects.create(
            title="Genmaicha", slug="genmaicha", body=f"Green tea with roasted rice. {pasted} Brew it at 80 °C."
        )
        call_command("agent_reindex", verbosity=0)
    assert indexed(article)
