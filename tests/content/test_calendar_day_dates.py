"""Content dated with a calendar date (a ``DateField``, or ``get_published_at`` returning a ``date``): the day an
editor typed is the day every door shows and filters on, whatever the site's ``TIME_ZONE``. It was stored as
midnight in ``TIME_ZONE`` while the doors read and filter UTC days, so east of UTC an item dated 2024-03-10 was
shown and found as 2024-03-09, and west of UTC an AHP ``published_before`` of its own day left it out. Through
HTTP (AHP /agent/converse, NLWeb /ask, /llms-full.txt), real PostgreSQL and the real embedding model."""

from __future__ import annotations

import datetime
import json
from io import StringIO

import pytest
from django.core.management import call_command

import agent_handshake
from agent_handshake.models import Document, Passage
from tests.nlweb.test_nlweb import ask
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

DAY = datetime.date(2024, 3, 10)
ZONES = ["Europe/Berlin", "Pacific/Kiritimati", "America/Los_Angeles", "Pacific/Pago_Pago", "UTC"]


class DatedArticleContent(agent_handshake.ContentConfig):
    """Articles dated by the day alone, as a model with a ``DateField`` is."""

    schema_type = "Article"
    title_field = "title"
    summary_field = "summary"
    body_field = "body"
    section = "Articles"

    def get_published_at(self, obj):
        return obj.published_at.date() if obj.published_at else None


@pytest.fixture(params=ZONES)
def dated(request, settings, registries, publish):
    """A site in the zone of the test's parameter, with one article dated DAY (and its document and passages)."""
    settings.TIME_ZONE = request.param
    content_registry, _ = registries
    content_registry.unregister(Article)
    content_registry.register(Article, DatedArticleContent)
    # Noon UTC: its UTC day is DAY, so the config gives DAY.
    moment = datetime.datetime(2024, 3, 10, 12, tzinfo=datetime.timezone.utc)
    return publish(
        Article,
        title="Descaling a kettle",
        slug="descaling",
        summary="Citric acid removes limescale.",
        body="Descale a kettle with citric acid every month.",
        published_at=moment,
    )


def converse(client, filters: dict) -> list[str]:
    body = {"ahp": "0.1", "capability": "content_search", "query": "How do I descale a kettle?"}
    body["context"] = {"filters": filters}
    response = client.post("/agent/converse", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    return [source["url"] for source in response.json()["response"].get("sources", [])]


def nlweb(client, query: dict) -> list[dict]:
    response, answer = ask(client, "descale a kettle", query=query)
    assert response.status_code == 200, answer
    return answer["results"]


def test_the_stored_moment_is_the_days_midnight_in_utc(dated):
    document = Document.objects.get(url="/articles/descaling/")
    midnight = datetime.datetime(2024, 3, 10, tzinfo=datetime.timezone.utc)
    assert document.published_at == midnight
    assert set(Passage.objects.filter(document=document).values_list("published_at", flat=True)) == {midnight}


def test_nlweb_shows_and_filters_the_day_typed(client, dated):
    assert [result["datePublished"] for result in nlweb(client, {})] == [DAY.isoformat()]
    assert [result["url"] for result in nlweb(client, {"datePublished": "2024-03-10"})] == [
        "http://testserver/articles/descaling/"
    ]
    assert nlweb(client, {"datePublished": "2024-03-09"}) == []
    assert nlweb(client, {"datePublished": "2024-03-11"}) == []
    assert len(nlweb(client, {"datePublishedAfter": "2024-03-10", "datePublishedBefore": "2024-03-10"})) == 1
    assert nlweb(client, {"datePublishedAfter": "2024-03-11"}) == []
    assert nlweb(client, {"datePublishedBefore": "2024-03-09"}) == []


def test_ahp_filters_on_the_day_typed(client, dated):
    url = "/articles/descaling/"
    assert url in converse(client, {"published_after": "2024-03-10", "published_before": "2024-03-10"})
    assert url in converse(client, {"published_before": "2024-03-10"})
    assert url in converse(client, {"published_after": "2024-03-10"})
    assert url not in converse(client, {"published_after": "2024-03-11"})
    assert url not in converse(client, {"published_before": "2024-03-09"})


def test_ahp_feed_and_llms_full_txt_show_the_day_typed(client, dated):
    body = {"ahp": "0.1", "capability": "content_search", "query": "How do I descale a kettle?"}
    body["context"] = {"accept_types": ["application/feed"]}
    response = client.post("/agent/converse", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    items = response.json()["response"]["payload"]["items"]
    assert [item["published_at"] for item in items] == ["2024-03-10T00:00:00+00:00"]
    text = b"".join(client.get("/llms-full.txt").streaming_content).decode()
    assert "Published: 2024-03-10" in text
    assert "Published: 2024-03-09" not in text


def test_agent_reindex_corrects_a_document_stored_on_another_day(client, dated):
    """An index written before the fix holds the site's local midnight (and the hash of it): agent_reindex finds
    the hash changed and rewrites the document and its passages (embedding them again)."""
    document = Document.objects.get(url="/articles/descaling/")
    local_midnight = datetime.datetime(2024, 3, 9, 23, tzinfo=datetime.timezone.utc)  # Berlin's, in winter
    Document.objects.filter(pk=document.pk).update(
        published_at=local_midnight, content_hash="0" * 64, indexed_hash="0" * 64
    )
    Passage.objects.filter(document=document).update(published_at=local_midnight)
    assert [result["datePublished"] for result in nlweb(client, {})] == ["2024-03-09"]

    call_command("agent_reindex", stdout=StringIO())

    assert [result["datePublished"] for result in nlweb(client, {"datePublished": "2024-03-10"})] == ["2024-03-10"]
    assert nlweb(client, {"datePublished": "2024-03-09"}) == []
    text = b"".join(client.get("/llms-full.txt").streaming_content).decode()
    assert "Published: 2024-03-10" in text


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/Los_Angeles"])
def test_a_site_without_time_zone_support_shows_and_filters_the_day_typed(client, settings, registries, publish, zone):
    """With ``USE_TZ = False`` the database gives naive datetimes in the site's local time: NLWeb showed the
    midnight UTC of a date read in Los Angeles as the day before."""
    settings.USE_TZ, settings.TIME_ZONE = False, zone
    content_registry, _ = registries
    content_registry.unregister(Article)
    content_registry.register(Article, DatedArticleContent)
    publish(
        Article,
        title="Descaling a kettle",
        slug="descaling",
        body="Descale a kettle with citric acid every month.",
        published_at=datetime.datetime(2024, 3, 10, 12),
    )
    assert [result["datePublished"] for result in nlweb(client, {"datePublished": "2024-03-10"})] == ["2024-03-10"]
    assert nlweb(client, {"datePublished": "2024-03-09"}) == []
    text = b"".join(client.get("/llms-full.txt").streaming_content).decode()
    assert "Published: 2024-03-10" in text
