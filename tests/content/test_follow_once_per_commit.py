"""``ContentConfig.follow``: a followed object saved several times in one transaction (a form's save, then a
signal's update of the same row) queues the re-indexing of its followers once, on its commit; before, each save
queued every follower again (10,000 posts of an author saved twice: 20,000 messages)."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import override_settings

from tests.content import test_follow_batches, test_follow_related
from tests.content.test_follow_batches import queued
from tests.content.test_follow_related import Essay, Writer

pytestmark = pytest.mark.django_db

essay_tables = test_follow_related.essay_tables
filesystem_broker = test_follow_batches.filesystem_broker


def test_repeated_saves_in_one_transaction_queue_the_followers_once(essay_tables, commit, filesystem_broker):
    writer = commit(Writer.objects.create, name="Ines Park")
    for number in range(3):
        commit(Essay.objects.create, title=f"Essay {number}", writer=writer)

    def edit_three_times():
        for name in ("Ines P.", "Ines Park-Lee", "Ines Park-Lee (ed.)"):
            writer.name = name
            writer.save()

    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        commit(edit_three_times)
    messages = queued(filesystem_broker)
    assert len(messages) == 1
    assert len(messages[0][1][2]) == 3


def test_saves_in_two_transactions_queue_the_followers_twice(essay_tables, commit, filesystem_broker):
    writer = commit(Writer.objects.create, name="Ines Park")
    commit(Essay.objects.create, title="Sencha", writer=writer)
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        for name in ("Ines P.", "Ines Park-Lee"):
            writer.name = name
            commit(writer.save)
    assert len(queued(filesystem_broker)) == 2


def test_a_save_after_a_rolled_back_savepoint_still_queues_its_followers(essay_tables, commit, filesystem_broker):
    """The save inside the rolled-back savepoint took its callback with it: the later save must not find it."""
    writer = commit(Writer.objects.create, name="Ines Park")
    commit(Essay.objects.create, title="Sencha", writer=writer)

    def save_rolled_back_then_again():
        try:
            with transaction.atomic():
                writer.name = "Mistake"
                writer.save()
                raise ValueError("undo")
        except ValueError:
            pass
        writer.name = "Ines Park-Lee"
        writer.save()

    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        commit(save_rolled_back_then_again)
    assert len(queued(filesystem_broker)) == 1
