"""The registration API: what a site admin registers must do what it says, or be refused at startup."""

from __future__ import annotations

import json

import pytest

import agent_handshake
from agent_handshake.concierge import answering
from agent_handshake.registry import Capability
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


def ask(client, capability: str, query: str) -> dict:
    response = client.post("/agent/converse", json.dumps({"ahp": "0.1", "capability": capability, "query": query}),
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 200, response.content[:300]
    return response.json()


def test_a_capability_naming_its_models_as_django_labels_them_answers_from_them(client, publish, registries):
    """``models=("testapp.Article",)`` is how Django writes a model's label (``Model._meta.label``, and the README's
    ``applies_to={"shop.Product": ...}``): the capability found nothing in them, and answered as if the site had
    nothing on the question."""
    publish(Article, title="Gyokuro", slug="gyokuro", body="Brew gyokuro at sixty degrees for two minutes.")
    agent_handshake.register_capability(
        Capability(name="article_search", description="Search the articles.", mode="MODE2",
                   models=("testapp.Article",), handler=answering.content_answer)
    )  # fmt: skip
    body = ask(client, "article_search", "At what temperature should I brew gyokuro?")
    assert [source["url"] for source in body["response"]["sources"]][:1] == ["/articles/gyokuro/"]
