"""A save re-indexes every registered model whose rows it writes, whichever class it was made through: a registered
proxy when its concrete model is saved (Django sends the signal for the class saved), a registered model when one
of its proxies is saved or deleted, and a registered parent when a child of multi-table inheritance is saved."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import models

import agent_handshake
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig
from tests.isolated_apps import isolated_model

pytestmark = pytest.mark.django_db

LeavesModel = isolated_model("leaves", __name__)


class Leaf(LeavesModel):
    title = models.CharField(max_length=100)
    body = models.TextField(blank=True)
    featured = models.BooleanField(default=False)


class FeaturedLeaf(Leaf):
    """What a site registers when agents should see some rows of a model, told apart by a config of their own."""

    class Meta(LeavesModel.Meta):
        proxy = True


class PressedLeaf(Leaf):
    """A child of multi-table inheritance: saving it saves its Leaf row too."""

    pressed_on = models.DateField(null=True)


class LeafContent(ContentConfig):
    title_field = "title"
    body_field = "body"


class FeaturedLeafContent(LeafContent):
    def get_queryset(self):
        return FeaturedLeaf.objects.filter(featured=True)


@pytest.fixture
def leaf_tables(registries, create_tables):
    create_tables(Leaf, PressedLeaf)


def titles() -> list[str]:
    # A proxy's documents are stored under its concrete model's content type, as ContentType.get_for_model gives it.
    return sorted(
        Document.objects.filter(content_type=ContentType.objects.get_for_model(Leaf)).values_list("title", flat=True)
    )


def followed_through(model, commit, title: str, retitled: str, **fields) -> None:
    """A leaf made, retitled and deleted through ``model`` (each step committed): the registered model's document
    follows each step."""
    leaf = commit(model.objects.create, title=title, **fields)
    assert titles() == [title]
    leaf.title = retitled
    commit(leaf.save)
    assert titles() == [retitled]
    commit(leaf.delete)
    assert titles() == []


def test_a_registered_proxy_follows_saves_of_its_concrete_model(
    leaf_tables, commit, django_capture_on_commit_callbacks
):
    """post_save's sender is the class saved (Leaf), which was not registered: the proxy's document was never
    written, nor changed or removed afterwards, until agent_reindex."""
    agent_handshake.register(FeaturedLeaf, FeaturedLeafContent)
    with django_capture_on_commit_callbacks(execute=True):  # two saves in one transaction
        leaf = Leaf.objects.create(title="Sencha", body="Steamed green tea.", featured=True)
        Leaf.objects.create(title="Dust", body="Not featured.")
    assert titles() == ["Sencha"]

    leaf.title = "Sencha, first flush"
    commit(leaf.save)
    assert titles() == ["Sencha, first flush"]

    leaf.featured = False
    commit(leaf.save)
    assert titles() == []

    leaf.featured = True
    commit(leaf.save)
    assert titles() == ["Sencha, first flush"]
    commit(leaf.delete)
    assert titles() == []


def test_a_registered_model_follows_saves_and_deletes_through_its_proxy(leaf_tables, commit):
    """Saved through a proxy, the signal's sender is the proxy, which had no receiver: the registered model's
    document was never written, changed or deleted."""
    agent_handshake.register(Leaf, LeafContent)
    followed_through(
        FeaturedLeaf, commit, "Genmaicha", "Genmaicha with matcha", body="With roasted rice.", featured=True
    )


def test_a_registered_parent_follows_saves_of_its_child_model(leaf_tables, commit):
    """Saving a child of multi-table inheritance writes the parent's row (its title here), but the signal names only
    the child: the parent's document stayed as it was."""
    agent_handshake.register(Leaf, LeafContent)
    followed_through(PressedLeaf, commit, "Pressed oolong", "Pressed oolong, 1998", body="Kept in a book.")


def test_a_model_registered_beside_its_proxy_is_indexed_only_as_the_class_saved(
    leaf_tables, django_capture_on_commit_callbacks
):
    """Both share one table, so one content type: their documents of a row are one document (an overlap the site
    should avoid). A save indexes it as the class it was saved through, as before, not as both in turn (the proxy's
    run would delete what the model's run wrote, for a row outside the proxy's queryset)."""
    agent_handshake.register(Leaf, LeafContent)
    agent_handshake.register(FeaturedLeaf, FeaturedLeafContent)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Leaf.objects.create(title="Bancha", body="Late harvest.")
    assert len(callbacks) == 1
    assert titles() == ["Bancha"]
