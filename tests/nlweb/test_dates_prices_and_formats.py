"""NLWeb v0.54 ``/ask`` and ``/await``: ``datePublished`` as that whole day and no more, a price with a thousands
separator, a list of the response formats a client accepts, and null optional members read as absent (in process,
Django's test client through the whole middleware stack, the real embedding model and PostgreSQL)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from demo_site.blog.models import Post
from tests.nlweb.test_nlweb import ask, post
from tests.nlweb_schema import assert_valid

pytestmark = pytest.mark.django_db


def test_date_published_is_that_day_and_not_the_next_midnight(client, demo_content, django_capture_on_commit_callbacks):
    """``datePublished: D`` is the day D: content published at midnight (UTC) the next day is published on D+1.
    A ``DateField`` site's content is all published at midnight, so the bound must be exclusive."""
    post = Post.objects.get(published_at=datetime.datetime(2024, 7, 11, 15, tzinfo=datetime.UTC))
    post.published_at = datetime.datetime(2024, 7, 12, tzinfo=datetime.UTC)  # midnight: the start of the 12th
    with django_capture_on_commit_callbacks(execute=True):
        post.save()
    _, on_the_day = ask(client, post.title, query={"datePublished": "2024-07-12"})
    assert_valid(on_the_day)
    assert post.title in [r["name"] for r in on_the_day["results"]]
    _, day_before = ask(client, post.title, query={"datePublished": "2024-07-11"})
    assert_valid(day_before)
    assert post.title not in [r["name"] for r in day_before["results"]], day_before["results"]


def test_a_price_with_a_thousands_separator_is_that_many_dollars(client, demo_content):
    """ "under $1,000" is under a thousand dollars, not under one dollar (the comma was read as a decimal point,
    so every product was filtered out); a decimal comma ("12,50") is still a decimal comma."""
    from agent_handshake.nlweb.request import parse_price

    _, cheap = ask(client, "green tea", query={"itemType": "Product", "price": "under $1,000"})
    assert_valid(cheap)
    assert cheap["results"]
    assert parse_price("under $1,000").high == 1000
    assert parse_price("$1,250.50 - $2,000").low == Decimal("1250.50")
    assert parse_price("under 12,50").high == Decimal("12.50")


def test_response_format_may_list_the_formats_the_client_accepts(client, demo_content):
    """§3.3.1: "A client may specify the formats it can accept and leave it to the NLWeb agent to choose the best":
    a list of formats was refused (400 INVALID_PARAMETER); the first one this site speaks is answered."""
    response, app = ask(client, "hojicha", prefer={"response_format": ["widget_v2", "chatgpt_app", "conv_search"]})
    assert response.status_code == 200, app
    assert_valid(app)
    assert app["_meta"]["response_format"] == "chatgpt_app"
    assert app["structuredData"]
    response, search = ask(client, "hojicha", prefer={"response_format": ["conversational_search", "chatgpt_app"]})
    assert response.status_code == 200, search
    assert search["_meta"]["response_format"] == "conv_search"
    assert search["results"]
    response, failure = ask(client, "hojicha", prefer={"response_format": [1]})
    assert response.status_code == 400, failure
    assert failure["error"]["details"]["fields"] == ["prefer.response_format"]


def test_null_optional_members_are_absent_ones(client, demo_content):
    """A client that writes its unset optional members as null (a pydantic model dumped without exclude_none)
    was refused for three of them (prefer.streaming, meta.api_version/version, /await's action) while the parser
    reads null as absent everywhere else."""
    response, answer = ask(
        client, "hojicha", prefer={"streaming": None, "mode": None}, meta={"api_version": None, "version": None}
    )
    assert response.status_code == 200, answer
    assert not response.streaming
    assert answer["_meta"]["response_type"] == "answer"
    assert answer["results"]
    response, failure = post(client, "/await", {"promise_token": "nope", "action": None})
    assert response.status_code == 401, failure  # read as a checkin: the promise is nobody's without credentials
    assert failure["error"]["code"] == "AUTHENTICATION_REQUIRED"
