"""A registered child of multi-table inheritance is re-indexed when its parent's row is saved through the parent
model (an admin of the parent, a script that edits parents): Django names only the parent in post_save, which had
no receiver, so the child's document kept the old title (or text) until ``agent_reindex``."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

import agent_handshake
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig
from tests.content.test_proxy_models import FeaturedLeaf, Leaf, PressedLeaf, leaf_tables  # noqa: F401

pytestmark = pytest.mark.django_db


class PressedLeafContent(ContentConfig):
    title_field = "title"
    body_field = "body"

    def get_queryset(self):
        return PressedLeaf.objects.filter(featured=False)


def pressed_titles() -> list[str]:
    content_type = ContentType.objects.get_for_model(PressedLeaf)
    return sorted(Document.objects.filter(content_type=content_type).values_list("title", flat=True))


def test_a_registered_child_follows_saves_of_its_parent_row(leaf_tables, django_capture_on_commit_callbacks):  # noqa: F811
    agent_handshake.register(PressedLeaf, PressedLeafContent)
    with django_capture_on_commit_callbacks(execute=True):
        pressed = PressedLeaf.objects.create(title="Pressed oolong", body="Kept in a book.")
        Leaf.objects.create(title="Loose leaf", body="No child row.")
    assert pressed_titles() == ["Pressed oolong"]

    parent = Leaf.objects.get(pk=pressed.pk)
    parent.title = "Pressed oolong, 1998"
    with django_capture_on_commit_callbacks(execute=True):
        parent.save()
    assert pressed_titles() == ["Pressed oolong, 1998"]

    # Through a proxy of the parent too; and a change that takes it out of the child's queryset removes it.
    proxied = FeaturedLeaf.objects.get(pk=pressed.pk)
    proxied.featured = True
    with django_capture_on_commit_callbacks(execute=True):
        proxied.save()
    assert pressed_titles() == []


def test_a_parent_without_a_registered_child_row_queues_nothing(leaf_tables, django_capture_on_commit_callbacks):  # noqa: F811
    agent_handshake.register(PressedLeaf, PressedLeafContent)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Leaf.objects.create(title="Loose leaf", body="No child row.")
    assert callbacks == []
