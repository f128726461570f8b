"""NLWeb's ``query.price`` and ``query.itemType`` narrow retrieval to documents: that narrowing was a Python list of
every matching document id, read from the database and sent back as one ``ANY(array)`` parameter of the retrieval
query, so a small request (``"price": "over 0"``) cost as much as the site is large. It is now a subquery: the
SQL is the same length however many documents match. Django's test client, real PostgreSQL, the demo content."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_handshake.indexing import sync_object
from agent_handshake.models import Document
from agent_handshake.registry import content_registry
from demo_site.pages.models import Page
from demo_site.shop.models import Product
from tests.nlweb.test_item_types_and_streams import TypedPageContent
from tests.nlweb.test_nlweb import ask
from tests.nlweb_schema import assert_valid

pytestmark = pytest.mark.django_db


RETRIEVAL = ("WITH nearest", "SELECT id, embedding", "SELECT p.passage_id")  # vector (graph, exact) and BM25


def retrieval_sql(client, text: str, query: dict) -> tuple[list[str], dict]:
    """The retrieval queries of one ``/ask`` (those that apply the filters), and its answer."""
    with CaptureQueriesContext(connection) as captured:
        response, answer = ask(client, text, query=query)
    assert response.status_code == 200, answer
    assert_valid(answer)
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith(RETRIEVAL)], answer


def shown(sql: list[str]) -> list[str]:
    return [re.sub(r"\[[-0-9.,e]+\]", "[vector]", text)[:1500] for text in sql]


def literals_out(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "0", text)


def more_products(count: int) -> None:
    for n in range(count):
        product = Product.objects.create(
            name=f"Extra tea {n}", slug=f"extra-tea-{n}", sku=f"EXTRA-{n}", category="tea", summary="A green tea.",
            description="A green tea.", price=Decimal("3.50"), stock=5,
        )  # fmt: skip
        sync_object("shop", "product", product.pk)


def test_a_price_is_a_subquery_not_a_list_of_every_priced_document(client, demo_content):
    priced = set(Document.objects.filter(content_type__model="product").values_list("pk", flat=True))
    sql, answer = retrieval_sql(client, "green tea", {"price": "over 0"})
    assert sql, "no retrieval query was seen"
    assert answer["results"]
    assert all(float(r["offers"]["price"]) > 0 for r in answer["results"])
    assert all("document_id = ANY" not in text for text in sql), shown(sql)
    assert all("document_id IN (SELECT" in text for text in sql), shown(sql)

    more_products(40)
    assert len(priced) + 40 == Document.objects.filter(content_type__model="product").count()
    grown, answer = retrieval_sql(client, "green tea", {"price": "over 0"})
    assert answer["results"]
    assert sorted(map(literals_out, grown)) == sorted(map(literals_out, sql))  # the same SQL, 40 more products


def test_a_mixed_item_type_is_a_subquery_and_still_exact(client, demo_content, registries):
    """Pages of several types in one model: the documents of the type asked for, by a subquery."""
    content_registry._configs[Page] = TypedPageContent(Page)
    for page in Page.objects.all():
        sync_object("pages", "page", page.pk)
    sql, answer = retrieval_sql(client, "Who are you, what is Lantern & Kettle?", {"itemType": "AboutPage"})
    assert sql, "no retrieval query was seen"
    assert [r["@type"] for r in answer["results"]] == ["AboutPage"]
    assert all("document_id = ANY" not in text for text in sql), shown(sql)
    assert all("document_id IN (SELECT" in text for text in sql), shown(sql)


def test_item_type_and_price_together_meet_both(client, demo_content):
    _, answer = retrieval_sql(client, "green tea", {"itemType": "Product", "price": "10 to 30"})
    assert answer["results"]
    assert all(10 <= float(r["offers"]["price"]) <= 30 for r in answer["results"])
    assert {r["@type"] for r in answer["results"]} == {"Product"}


def test_the_answer_cache_reads_no_list_of_the_priced_documents(client, demo_content):
    """The answer cache's key named the filter's documents by their ids: reading them for it cost what the subquery
    saves (a fifth of a second at 100,000 products). A query's documents change with the site's data, which no key
    names, so such an answer is not cached: asked again after a price changes (no document changed), the answer
    follows the price."""
    with CaptureQueriesContext(connection) as captured:
        response, answer = ask(client, "green tea", query={"price": "under 20"})
    assert response.status_code == 200, answer
    ids = 'SELECT "agent_handshake_document"."id" AS "pk" FROM "agent_handshake_document"'
    listing = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(ids) and "price" in q["sql"]]
    assert listing == [], listing
    cheapest = next(r for r in answer["results"] if r.get("offers"))
    Product.objects.filter(name=cheapest["name"]).update(price=Decimal("25.00"))  # no signal, no document change
    _, again = ask(client, "green tea", query={"price": "under 20"})
    assert cheapest["name"] not in [r["name"] for r in again["results"]]
