"""agent_reindex goes on past an object it cannot index: the others are indexed, the documents of unpublished objects
removed, the models after it done, and the run ends with an error that names the object."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command

from agent_handshake.models import Document, Passage
from demo_site.blog.models import Author, Post
from demo_site.pages.models import Page

pytestmark = pytest.mark.django_db


def document_titles(model) -> set[str]:
    return set(
        Document.objects.filter(content_type=ContentType.objects.get_for_model(model)).values_list("title", flat=True)
    )


def test_agent_reindex_goes_on_past_an_object_it_cannot_index(publish):
    author = Author.objects.create(name="Mei Lin", slug="mei")
    publish(Post, title="Withdrawn", slug="withdrawn", author=author, summary="s", body="Old news.", status="published")
    assert document_titles(Post) == {"Withdrawn"}
    # Changes made without signals, as an import or a bulk edit makes them: agent_reindex is what catches them up.
    Post.objects.filter(slug="withdrawn").update(status="draft")
    broken = Page.objects.create(title="Imported", slug="", body="A page imported without a slug.")  # no URL
    Page.objects.bulk_create([Page(title="About", slug="about", body="We brew tea.")])
    Post.objects.bulk_create(
        [Post(title="Oolong", slug="oolong", author=author, summary="s", body="Rolled leaves.", status="published")]
    )

    out = StringIO()
    named = rf"1 object could not be indexed.*pages\.page {broken.pk}\b.*NoReverseMatch"
    with pytest.raises(CommandError, match=named):
        call_command("agent_reindex", stdout=out, stderr=StringIO())
    # Page's reverse() of an empty slug raised for one page; before, that ended the run there.
    assert "pages.page: 1 created, 0 updated, 0 unchanged, 0 deleted, 1 failed" in out.getvalue()
    assert document_titles(Page) == {"About"}
    assert document_titles(Post) == {"Oolong"}  # the model after it indexed, its unpublished post's document gone
    assert Passage.objects.filter(title="Oolong").exists()
    assert "Full-text statistics rebuilt" in out.getvalue()

    # Run again (the page still broken): nothing is written twice, and the page is named again.
    out = StringIO()
    with pytest.raises(CommandError, match=rf"pages\.page {broken.pk}\b"):
        call_command("agent_reindex", stdout=out, stderr=StringIO())
    assert "pages.page: 0 created, 0 updated, 1 unchanged, 0 deleted, 1 failed" in out.getvalue()
    assert "blog.post: 0 created, 0 updated, 1 unchanged, 0 deleted; 0 embedded" in out.getvalue()

    # Once the page is given a slug, the run indexes it and succeeds.
    Page.objects.filter(pk=broken.pk).update(slug="imported")
    out = StringIO()
    call_command("agent_reindex", stdout=out)
    assert "pages.page: 1 created, 0 updated, 1 unchanged, 0 deleted; 1 embedded" in out.getvalue()
    assert document_titles(Page) == {"About", "Imported"}
