"""``ContentConfig.follow`` through a ForeignKey with ``to_field`` (a country referenced by its code, a user by
username): the column holds the other key, not the followed object's primary key, so the followers must be found
through the followed object's key as the relation stores it."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import models

import agent_handshake
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig
from tests.isolated_apps import isolated_model

pytestmark = pytest.mark.django_db


CodesModel = isolated_model("codes", __name__)


class Country(CodesModel):
    code = models.CharField(max_length=2, unique=True)
    name = models.CharField(max_length=100)


class Guide(CodesModel):
    title = models.CharField(max_length=100)
    country = models.ForeignKey(Country, to_field="code", on_delete=models.SET_NULL, null=True, related_name="guides")


class GuideContent(ContentConfig):
    title_field = "title"
    follow = ("country",)

    def get_markdown(self, guide):
        return f"In {guide.country.name if guide.country else 'nowhere'}."


class CountryContent(ContentConfig):
    """The other way: a country's page lists the guides that point at it by code."""

    title_field = "name"
    follow = ("guides",)

    def get_url(self, country):
        return f"/countries/{country.code}/"

    def get_markdown(self, country):
        return ", ".join(sorted(guide.title for guide in country.guides.all())) or "No guides."


@pytest.fixture
def code_tables(registries, create_tables):
    create_tables(Country, Guide)


def markdown(model) -> dict[str, str]:
    documents = Document.objects.filter(content_type=ContentType.objects.get_for_model(model))
    return dict(documents.values_list("title", "markdown"))


def test_renaming_a_country_followed_by_code_rewrites_its_guides(code_tables, commit):
    agent_handshake.register(Guide, GuideContent)
    commit(Country.objects.create, code="pt", name="Portugal")  # pk 1 (or more): never a code
    japan = commit(Country.objects.create, code="jp", name="Japan")
    commit(Guide.objects.create, title="Tea in Uji", country=japan)
    assert markdown(Guide)["Tea in Uji"] == "In Japan."

    japan.name = "Nippon"
    commit(japan.save)
    assert markdown(Guide)["Tea in Uji"] == "In Nippon."

    commit(japan.delete)  # SET_NULL: one UPDATE without the guides' signals
    assert markdown(Guide)["Tea in Uji"] == "In nowhere."


def test_a_new_guide_rewrites_the_country_that_follows_it_by_code(code_tables, commit):
    agent_handshake.register(Country, CountryContent)
    japan = commit(Country.objects.create, code="jp", name="Japan")
    assert markdown(Country)["Japan"] == "No guides."
    guide = commit(Guide.objects.create, title="Tea in Uji", country=japan)
    assert markdown(Country)["Japan"] == "Tea in Uji"
    guide.title = "Matcha in Uji"
    commit(guide.save)
    assert markdown(Country)["Japan"] == "Matcha in Uji"
