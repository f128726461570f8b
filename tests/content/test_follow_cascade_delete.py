"""``ContentConfig.follow``: deleting a followed object whose followers are deleted with it (``CASCADE``) removes their
documents through their own deletes; the followers read before the delete must not be indexed again on top of that,
nor reported as left stale (in "sync" mode, over ``FOLLOW_SYNC_LIMIT``, the log told the operator to run
``agent_reindex`` for objects that no longer exist)."""

from __future__ import annotations

import logging

import pytest

from tests.content import test_follow_batches, test_follow_related
from tests.content.test_follow_batches import queued
from tests.content.test_follow_related import Essay, Shelf, Writer, markdown

pytestmark = pytest.mark.django_db

essay_tables = test_follow_related.essay_tables
filesystem_broker = test_follow_batches.filesystem_broker


def test_a_cascade_delete_does_not_report_its_deleted_followers_as_stale(essay_tables, commit, monkeypatch, caplog):
    from agent_handshake import signal_handlers

    writer = commit(Writer.objects.create, name="Ines Park")
    other = commit(Writer.objects.create, name="Tomas Vey")
    for number in range(3):
        commit(Essay.objects.create, title=f"Essay {number}", writer=writer)
    commit(Essay.objects.create, title="Puerh", writer=other)
    monkeypatch.setattr(signal_handlers, "FOLLOW_SYNC_LIMIT", 1)
    with caplog.at_level(logging.WARNING, logger="agent_handshake.signal_handlers"):
        commit(writer.delete)
    assert list(markdown()) == ["Puerh"]
    assert [r.getMessage() for r in caplog.records if "agent_reindex" in r.getMessage()] == []


def test_a_cascade_delete_queues_no_batch_for_its_deleted_followers(essay_tables, commit, settings, filesystem_broker):
    writer = commit(Writer.objects.create, name="Ines Park")
    for number in range(3):
        commit(Essay.objects.create, title=f"Essay {number}", writer=writer)
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INDEX_ON_SAVE": "celery"}
    commit(writer.delete)
    names = [message[0] for message in queued(filesystem_broker)]
    assert "agent_handshake.index_objects" not in names  # each essay's own delete queued index_object


def test_set_null_followers_are_still_re_indexed(essay_tables, commit):
    writer = commit(Writer.objects.create, name="Ines Park")
    teas = commit(Shelf.objects.create, name="Teas")
    commit(Essay.objects.create, title="Sencha", writer=writer, shelf=teas)
    commit(teas.delete)
    assert "Shelved under: nothing." in markdown()["Sencha"]
