"""Agent documents follow the registered objects: signals on commit, and manage.py agent_reindex."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command
from django.db import transaction

from agent_handshake import signals
from agent_handshake.models import Document, EmbeddingIndex, LexemeStat, Passage
from demo_site.blog.models import Author, Post, Tag
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


def documents_of(model):
    return Document.objects.filter(content_type=ContentType.objects.get_for_model(model))


def test_save_and_delete_follow_on_commit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        article = Article.objects.create(title="Pending", slug="pending")
    assert not documents_of(Article).exists()  # nothing until the transaction commits
    for callback in callbacks:
        callback()
    assert documents_of(Article).get().title == "Pending"

    with django_capture_on_commit_callbacks(execute=True):
        article.delete()
    assert not documents_of(Article).exists()


def test_rolled_back_save_changes_nothing(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                Article.objects.create(title="Rolled back", slug="rolled-back")
                raise RuntimeError
        except RuntimeError:
            pass
    assert callbacks == []
    assert not documents_of(Article).exists()


def test_m2m_changes_reindex_the_object(publish, django_capture_on_commit_callbacks):
    author = Author.objects.create(name="Mei Lin", slug="mei")
    post = publish(Post, title="Gaiwan", slug="gaiwan", author=author, summary="s", body="b", status="published")
    assert "Tags" not in documents_of(Post).get().markdown
    tag = Tag.objects.create(name="Oolong", slug="oolong")
    with django_capture_on_commit_callbacks(execute=True):
        post.tags.add(tag)
    assert "Tags: Oolong" in documents_of(Post).get().markdown


def test_m2m_changes_from_the_other_side_reindex_the_objects(publish, django_capture_on_commit_callbacks):
    # The relation is declared on Post; here it is changed from Tag's side (reverse=True, pk_set holds posts).
    author = Author.objects.create(name="Mei Lin", slug="mei")
    posts = [
        publish(Post, title=title, slug=title.lower(), author=author, summary="s", body="b", status="published")
        for title in ("Gaiwan", "Yixing")
    ]
    tag = Tag.objects.create(name="Oolong", slug="oolong")

    def markdown(post):
        return documents_of(Post).get(object_id=str(post.pk)).markdown

    with django_capture_on_commit_callbacks(execute=True):
        tag.posts.add(*posts)
    assert all("Tags: Oolong" in markdown(post) for post in posts)
    with django_capture_on_commit_callbacks(execute=True):
        tag.posts.remove(posts[0])
    assert "Tags" not in markdown(posts[0])
    assert "Tags: Oolong" in markdown(posts[1])
    with django_capture_on_commit_callbacks(execute=True):
        tag.posts.clear()  # no pk_set: the posts linked before the clear are re-indexed
    assert "Tags" not in markdown(posts[1])


def test_m2m_clear_on_the_declaring_side_reindexes_the_object(publish, django_capture_on_commit_callbacks):
    author = Author.objects.create(name="Mei Lin", slug="mei")
    post = publish(Post, title="Gaiwan", slug="gaiwan", author=author, summary="s", body="b", status="published")
    with django_capture_on_commit_callbacks(execute=True):
        post.tags.add(Tag.objects.create(name="Oolong", slug="oolong"))
    assert "Tags: Oolong" in documents_of(Post).get().markdown
    with django_capture_on_commit_callbacks(execute=True):
        post.tags.clear()
    assert "Tags" not in documents_of(Post).get().markdown


def test_unchanged_content_is_not_rewritten(publish, django_capture_on_commit_callbacks):
    article = publish(Article, title="Stable", slug="stable", body="same")
    received = []

    def receiver(sender, document, created, **kwargs):
        received.append((sender, document.title, created))

    signals.document_indexed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            article.save()
        assert received == []
        with django_capture_on_commit_callbacks(execute=True):
            article.body = "changed"
            article.save()
        assert received == [(Article, "Stable", False)]
    finally:
        signals.document_indexed.disconnect(receiver)


def test_fixture_loading_defers_to_reindex(django_capture_on_commit_callbacks):
    # raw saves (loaddata) queue no indexing; the management command does it afterwards.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Article(title="Raw", slug="raw").save_base(raw=True)
    assert callbacks == []
    assert not documents_of(Article).exists()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Article(title="Cooked", slug="cooked").save()
    assert len(callbacks) == 1
    assert documents_of(Article).get().title == "Cooked"


def test_agent_reindex_builds_updates_and_removes(publish):
    Article.objects.bulk_create([Article(title=f"Bulk {n}", slug=f"bulk-{n}", body=f"body {n}") for n in range(12)])
    out = StringIO()
    call_command("agent_reindex", "--model", "testapp.article", stdout=out)
    assert "testapp.article: 12 created, 0 updated, 0 unchanged, 0 deleted" in out.getvalue()
    assert "12/12" in out.getvalue()
    assert documents_of(Article).count() == 12

    # Changes made without signals (queryset.update, deleting in bulk) are caught up, the rest skipped.
    Article.objects.filter(slug="bulk-3").update(body="edited")
    Article.objects.filter(slug__in=["bulk-4", "bulk-5"]).update(published=False)
    out = StringIO()
    call_command("agent_reindex", "--model", "testapp.article", stdout=out)
    assert "1 updated, 9 unchanged, 2 deleted" in out.getvalue()
    assert documents_of(Article).get(object_id=str(Article.objects.get(slug="bulk-3").pk)).markdown == "edited"


def test_agent_reindex_all_models_and_errors():
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    for label in ("testapp.article", "blog.post", "pages.page", "videos.video", "shop.product"):
        assert f"{label}:" in out.getvalue()
    with pytest.raises(CommandError, match=r"shop\.order"):
        call_command("agent_reindex", "--model", "shop.order", stdout=StringIO())


def test_agent_reindex_removes_the_documents_of_a_model_no_longer_registered(publish, registries):
    """Unregistering a model left its documents and passages in the tables for good; a run over every model removes
    them (a run with --model leaves other models alone), and their words leave the full-text statistics."""
    publish(Article, title="Kettles", slug="kettles", body="Descale a zanzibarian kettle with citric acid.")
    author = Author.objects.create(name="Mei Lin", slug="mei")
    publish(Post, title="Gaiwan", slug="gaiwan", author=author, summary="s", body="Brew oolong.", status="published")
    assert documents_of(Article).count() == 1
    assert LexemeStat.objects.filter(lexeme="zanzibarian").exists()
    content_registry, _ = registries
    content_registry.unregister(Article)
    call_command("agent_reindex", "--model", "blog.post", stdout=StringIO())
    assert documents_of(Article).count() == 1  # --model: only the named model is visited
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    assert "testapp.article: 1 deleted (no longer registered)" in out.getvalue()
    assert documents_of(Article).count() == 0
    assert not Passage.objects.filter(model_label="testapp.article").exists()
    assert not LexemeStat.objects.filter(lexeme="zanzibarian").exists()
    assert documents_of(Post).count() == 1
    assert Passage.objects.filter(model_label="blog.post").exists()


def test_agent_reindex_rebuild_of_one_model_keeps_the_others(publish):
    publish(Article, title="Kettles", slug="kettles", body="Descale a kettle with citric acid.")
    author = Author.objects.create(name="Mei Lin", slug="mei")
    publish(Post, title="Gaiwan", slug="gaiwan", author=author, summary="s", body="Brew oolong.", status="published")
    post_passages = set(Passage.objects.filter(model_label="blog.post").values_list("pk", flat=True))
    article_passages = set(Passage.objects.filter(model_label="testapp.article").values_list("pk", flat=True))
    assert post_passages
    assert article_passages

    out = StringIO()
    call_command("agent_reindex", "--rebuild", "--model", "testapp.article", stdout=out)
    assert "Embedding the documents of testapp.article again" in out.getvalue()
    assert "testapp.article: 0 created, 0 updated, 1 unchanged, 0 deleted; 1 embedded" in out.getvalue()
    # The named model's passages were embedded again (new rows); the other model's were left alone.
    rebuilt = set(Passage.objects.filter(model_label="testapp.article").values_list("pk", flat=True))
    assert rebuilt
    assert not rebuilt & article_passages
    assert set(Passage.objects.filter(model_label="blog.post").values_list("pk", flat=True)) == post_passages
    assert "blog.post:" not in out.getvalue()
    assert LexemeStat.objects.filter(lexeme="oolong").get().passages >= 1


def test_agent_reindex_rebuild_of_one_model_refuses_a_new_embedding_model(publish):
    publish(Article, title="Kettles", slug="kettles", body="Descale a kettle.")
    EmbeddingIndex.objects.update(model_id="some/other-model")
    with pytest.raises(CommandError, match="leave out --model"):
        call_command("agent_reindex", "--rebuild", "--model", "testapp.article", stdout=StringIO())


def test_a_heading_with_a_long_run_of_spaces_is_indexed_at_once(publish):
    # The heading pattern used to backtrack in cubic time on such a line: minutes for a few thousand spaces, in
    # the saving request (INDEX_ON_SAVE "sync") or a worker, for every save of the object.
    heading = "## Descaling" + " " * 3000 + "kettles ##"
    started = time.monotonic()
    article = publish(Article, title="Kettles", slug="kettles", body=f"{heading}\n\nUse citric acid.")
    assert time.monotonic() - started < 5
    document = documents_of(Article).get(object_id=str(article.pk))
    assert document.indexed_hash == document.content_hash
    passage = Passage.objects.get(document=document)
    assert passage.heading == ("Descaling" + " " * 3000 + "kettles")[:500]
    assert passage.text == "Use citric acid."


@pytest.mark.parametrize("size", ["0", "-5"])
def test_agent_reindex_refuses_a_batch_size_below_one(publish, size):
    publish(Article, title="Kettles", slug="kettles", body="Descale a kettle.")
    passages = set(Passage.objects.values_list("pk", flat=True))
    for rebuild in ([], ["--rebuild"]):
        with pytest.raises(CommandError, match="--batch-size"):
            call_command("agent_reindex", "--batch-size", size, *rebuild, stdout=StringIO())
    # Refused before anything was dropped (a rebuild used to drop every passage, then fail).
    assert documents_of(Article).count() == 1
    assert set(Passage.objects.values_list("pk", flat=True)) == passages != set()


def test_agent_reindex_keeps_an_object_published_again_while_it_runs(publish, django_capture_on_commit_callbacks):
    from agent_handshake.indexing import reindex_model
    from agent_handshake.registry import content_registry

    publish(Article, title="Oolong", slug="oolong", body="Rinse oolong leaves once.")
    kettles = publish(Article, title="Kettles", slug="kettles", body="Descale a kettle with citric acid.")
    Article.objects.filter(pk=kettles.pk).update(published=False)  # no signal: its document waits for the reindex
    kettles.refresh_from_db()

    def an_editor_publishes_it_again(done: int, total: int) -> None:
        # While the run goes through the other objects, the object is published again (a save: its document is
        # written on commit); the run read the documents and the queryset before that.
        if not kettles.published:
            kettles.published = True
            with django_capture_on_commit_callbacks(execute=True):
                kettles.save()

    counts = reindex_model(content_registry.get_config(Article), progress=an_editor_publishes_it_again)

    assert counts["deleted"] == 0
    document = documents_of(Article).get(object_id=str(kettles.pk))  # its document was kept
    assert Passage.objects.filter(document=document).exists()


@pytest.mark.parametrize("seconds", ["-1", "99999999999"])
def test_agent_recover_jobs_refuses_an_age_out_of_range(seconds):
    # (Here with the other commands' odd input.) A negative age would count every running job as lost and send it
    # again; an age beyond the calendar crashed with an OverflowError traceback.
    with pytest.raises(CommandError, match="--older-than"):
        call_command("agent_recover_jobs", "--older-than", seconds, stdout=StringIO())
