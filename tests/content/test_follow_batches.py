"""``ContentConfig.follow`` in "celery" mode: a save of a followed object (a writer of many essays) queues its
followers in batches (``agent_handshake.index_objects``), not one message per follower, and once per commit however
often the object was saved in it. A batch indexes each object as ``index_object`` does; one that cannot be indexed
does not stop the others, and those the embedding backend could not embed are retried without the ones done.
(Once per commit: tests/content/test_follow_once_per_commit.py.)"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid

import pytest
from django.db.models import F
from django.test import override_settings

import agent_handshake
from agent_handshake.models import Document, Passage
from agent_handshake.retrieval.embeddings import EmbeddingUnavailable, MiniLMEmbeddings
from tests.content import test_follow_related
from tests.content.test_follow_related import Essay, EssayContent, Writer, markdown

essay_tables = test_follow_related.essay_tables

pytestmark = pytest.mark.django_db


def queued(folder) -> list[tuple[str, list]]:
    """The task name and arguments of each message in a filesystem broker's folder."""
    found = []
    for path in folder.iterdir():
        message = json.loads(path.read_bytes())
        args = json.loads(base64.b64decode(message["body"]))[0]
        found.append((message["headers"]["task"], args))
    return found


@pytest.fixture
def filesystem_broker(celery_app, tmp_path):
    celery_app(
        broker_url="filesystem://",
        broker_transport_options={"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)},
    )
    return tmp_path


def test_a_followed_save_queues_its_followers_in_batches(essay_tables, commit, filesystem_broker, monkeypatch):
    from agent_handshake import signal_handlers

    writer = commit(Writer.objects.create, name="Ines Park")
    essays = [commit(Essay.objects.create, title=f"Essay {number}", writer=writer) for number in range(5)]
    before = markdown()
    monkeypatch.setattr(signal_handlers, "FOLLOW_BATCH_SIZE", 2)

    writer.name = "Ines Park-Lee"
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        commit(writer.save)
    assert markdown() == before  # nothing indexed in the request
    messages = queued(filesystem_broker)
    assert [name for name, _ in messages] == ["agent_handshake.index_objects"] * 3
    assert sorted(len(args[2]) for _, args in messages) == [1, 2, 2]
    assert all(args[:2] == ["shelves", "essay"] for _, args in messages)
    assert sorted(pk for _, args in messages for pk in args[2]) == sorted(str(essay.pk) for essay in essays)


class EssayWithABrokenOne(EssayContent):
    def get_markdown(self, essay):
        if essay.title == "Broken":
            raise ValueError("this essay's markdown cannot be built")
        return super().get_markdown(essay)


def test_one_object_that_cannot_be_indexed_does_not_stop_its_batch(essay_tables, caplog):
    agent_handshake.unregister(Essay)
    agent_handshake.register(Essay, EssayWithABrokenOne)
    writer = Writer.objects.create(name="Ines Park")
    essays = [Essay.objects.create(title=title, writer=writer) for title in ("Sencha", "Broken", "Puerh")]

    from agent_handshake.tasks import index_objects

    result = index_objects.apply(args=("shelves", "essay", [str(essay.pk) for essay in essays]))
    assert result.successful(), result.traceback
    assert result.result == {"created": 2, "failed": 1}
    assert sorted(markdown()) == ["Puerh", "Sencha"]
    assert any("agent_reindex" in record.getMessage() for record in caplog.records)


class FlakyEmbeddings(MiniLMEmbeddings):
    """MiniLM, unavailable once for a text holding "Oolong" (an embedding server that drops one request)."""

    failures = 0

    def compute(self, texts):
        if FlakyEmbeddings.failures == 0 and any("Oolong" in text for text in texts):
            FlakyEmbeddings.failures += 1
            raise EmbeddingUnavailable("the embedding server dropped the request")
        return super().compute(texts)


def test_a_batch_the_embedding_backend_fails_in_is_retried_for_the_objects_left(essay_tables, monkeypatch):
    from celery.app.task import Task

    from agent_handshake.tasks import index_objects

    monkeypatch.setattr(FlakyEmbeddings, "failures", 0)
    retried: list[tuple] = []
    original_retry = Task.retry

    def record_retry(self, args=None, **options):
        retried.append(tuple(args))
        return original_retry(self, args=args, **options)

    monkeypatch.setattr(Task, "retry", record_retry)  # Celery's, not ours: to see what the retry carries
    writer = Writer.objects.create(name="Ines Park")
    titles = ("Sencha", "Oolong", "Puerh")
    essays = [Essay.objects.create(title=title, body=f"{title} tea.", writer=writer) for title in titles]
    keys = [str(essay.pk) for essay in essays]

    with override_settings(AGENT_HANDSHAKE={"EMBEDDING_BACKEND": "tests.content.test_follow_batches.FlakyEmbeddings"}):
        result = index_objects.apply(args=("shelves", "essay", keys))
    assert FlakyEmbeddings.failures == 1
    assert retried == [("shelves", "essay", keys[1:])]  # Sencha was done; not embedded again
    assert result.state in ("SUCCESS", "RETRY"), result.traceback
    documents = Document.objects.filter(object_id__in=keys, indexed_hash=F("content_hash"))
    assert sorted(documents.values_list("title", flat=True)) == ["Oolong", "Puerh", "Sencha"]


RENAME_SCRIPT = """
import django
django.setup()
from django.conf import settings
from django.test import override_settings
from agent_handshake import signal_handlers
from demo_site.blog.models import Author, Post
signal_handlers.FOLLOW_BATCH_SIZE = 2
with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "INDEX_ON_SAVE": "off"}):
    author = Author.objects.create(name="Ines Park", slug="ines-{suffix}")
    for number in range(3):
        Post.objects.create(
            title=f"Sencha {number}", slug=f"sencha-{number}-{suffix}", author=author, status="published",
            summary="Steamed.", body="## Method\\n\\nSteam the leaves for thirty seconds.",
        )
with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "INDEX_ON_SAVE": "celery"}):
    author.name = "Ines Park-Lee {suffix}"
    author.save()
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_indexes_the_batches_of_a_followed_save(tmp_path):
    from tests.content.test_celery_worker import ROOT, running_worker, worker_env

    (tmp_path / "queue").mkdir()
    env = worker_env("filesystem://", tmp_path)
    suffix = uuid.uuid4().hex[:6]
    with running_worker(env):
        subprocess.run(
            [sys.executable, "-c", RENAME_SCRIPT.replace("{suffix}", suffix)], cwd=ROOT, env=env, check=True, timeout=60
        )
        paths = [f"/blog/sencha-{number}-{suffix}/" for number in range(3)]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = Document.objects.filter(
                path__in=paths, markdown__startswith=f"By Ines Park-Lee {suffix}", indexed_hash=F("content_hash")
            )
            if done.count() == 3:
                break
            time.sleep(0.3)
    assert done.count() == 3, "the worker did not index the posts of the renamed author"
    assert Passage.objects.filter(document__in=done).values("document").distinct().count() == 3
