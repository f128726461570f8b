"""``ContentConfig.follow``: finding the followers of a saved or deleted object is a query of the follower's table, run
in the editor's request. When it fails (here the follower's table is not there yet: the code is deployed and its
migration not run; a lock or statement timeout does the same), the editor's save or delete must still succeed, and
the failure be logged with what brings the followers up to date."""

from __future__ import annotations

import logging

import pytest
from django.db import models

import agent_handshake
from agent_handshake.registry import ContentConfig
from tests.isolated_apps import isolated_model

pytestmark = pytest.mark.django_db


PendingModel = isolated_model("pending", __name__)


class Region(PendingModel):
    name = models.CharField(max_length=100)


class Country(PendingModel):
    name = models.CharField(max_length=100)
    region = models.ForeignKey(Region, null=True, on_delete=models.SET_NULL, related_name="countries")


class Guide(PendingModel):
    """Registered, but its table not created: its migration has not run yet."""

    title = models.CharField(max_length=100)
    country = models.ForeignKey(Country, on_delete=models.CASCADE, related_name="guides")


class GuideContent(ContentConfig):
    title_field = "title"
    follow = ("country", "country__region")


@pytest.fixture
def tables_without_guides(registries, create_tables):
    create_tables(Region, Country)
    agent_handshake.register(Guide, GuideContent)


def test_a_save_whose_followers_cannot_be_read_is_kept_and_logged(tables_without_guides, commit, caplog):
    japan = commit(Country.objects.create, name="Japan")
    japan.name = "Nippon"
    with caplog.at_level(logging.ERROR, logger="agent_handshake.signal_handlers"):
        commit(japan.save)  # before: the follow query's ProgrammingError, after the row was saved
    assert Country.objects.get(pk=japan.pk).name == "Nippon"  # and the transaction still usable
    (record,) = [r for r in caplog.records if "pending.guide" in r.getMessage()]
    assert "agent_reindex" in record.getMessage()


def test_a_delete_whose_followers_cannot_be_read_still_deletes(tables_without_guides, commit, caplog):
    asia = commit(Region.objects.create, name="Asia")
    japan = commit(Country.objects.create, name="Japan", region=asia)
    with caplog.at_level(logging.ERROR, logger="agent_handshake.signal_handlers"):
        commit(asia.delete)  # before: the read in pre_delete failed, and the delete with it
    assert not Region.objects.filter(pk=asia.pk).exists()
    japan.refresh_from_db()
    assert japan.region_id is None
    assert any("pending.guide" in r.getMessage() for r in caplog.records)
