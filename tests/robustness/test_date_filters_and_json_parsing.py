"""The retrieval filters and request parsing of the AHP and NLWeb doors: date filters that all hold at once, and a 400
naming those no moment can meet; a JSON body that gives a name twice, or an integer too long to read, refused in the
protocol's words (Django's test client through the whole middleware stack, the real embedding model and PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.nlweb.test_nlweb import ask, post
from tests.nlweb_schema import assert_valid
from tests.robustness.test_bad_input import assert_ahp_error, place
from tests.robustness.test_bad_input import post as converse

pytestmark = pytest.mark.django_db

AFTER, BEFORE = "context.filters.published_after", "context.filters.published_before"


def days(answer: dict) -> set[str]:
    return {result.get("datePublished") for result in answer["results"]}


@pytest.mark.parametrize(
    "bound",
    [{"datePublishedAfter": "2024-01-01"}, {"datePublishedBefore": "2024-12-31"}, {"datePublishedAfter": None}],
)
def test_a_day_and_a_bound_together_are_both_honoured(client, demo_content, bound):
    """``datePublished`` and ``datePublishedAfter``/``Before`` are constraints, all of which the results meet. The
    bound replaced the day's own bound instead (and a null one removed it): the day 2024-07-11 with "after
    2024-01-01" answered with the posts of January to July."""
    response, alone = ask(client, "tea", query={"datePublished": "2024-07-11"})
    assert response.status_code == 200, alone
    assert days(alone) == {"2024-07-11"}
    response, both = ask(client, "tea", query={"datePublished": "2024-07-11", **bound})
    assert response.status_code == 200, both
    assert_valid(both)
    assert days(both) == {"2024-07-11"}, both["results"]


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        (
            {"datePublishedAfter": "2025-01-01", "datePublishedBefore": "2020-01-01"},
            ["query.datePublishedAfter", "query.datePublishedBefore"],
        ),
        (
            {"datePublished": "2024-07-11", "datePublishedBefore": "2024-07-10T23:00:00Z"},
            ["query.datePublished", "query.datePublishedBefore"],
        ),
        (
            {"datePublished": "2024-07-11", "datePublishedAfter": "2024-07-12"},
            ["query.datePublished", "query.datePublishedAfter"],
        ),
    ],
)
def test_dates_no_moment_can_meet_are_a_400_naming_them(client, demo_content, query, fields):
    """A range that ends before it starts (bounds swapped, or a day and a bound outside it) was answered with no
    results, as if the site had nothing from then."""
    response, failure = ask(client, "tea", query=query)
    assert response.status_code == 400, failure
    assert_valid(failure)
    assert failure["error"]["code"] == "INVALID_PARAMETER"
    assert failure["error"]["details"]["fields"] == fields
    assert all(field in failure["error"]["message"] for field in fields)


def test_swapped_ahp_date_filters_are_a_400_naming_both(client, demo_content):
    body = place(AFTER, "2025-01-01")
    body["context"]["filters"]["published_before"] = "2020-01-01T00:00:00+01:00"
    error = assert_ahp_error(converse(client, body), 400, "invalid_request")
    assert error["fields"] == [AFTER, BEFORE]
    assert AFTER in error["message"]
    assert BEFORE in error["message"]
    # One moment is a range: both bounds are inclusive.
    body["context"]["filters"]["published_before"] = "2025-01-01T01:00:00+01:00"
    assert converse(client, body).status_code == 200


DUPLICATED = [
    ("/ask", b'{"query": {"text": "green tea", "itemType": "Product", "itemType": "VideoObject"}}', "itemType"),
    ("/ask", b'{"query": {"text": "green tea"}, "query": {"text": "oolong"}}', "query"),
    ("/agent/converse", b'{"ahp": "0.1", "capability": "content_search", "query": "tea", "query": "x"}', "query"),
]


@pytest.mark.parametrize(("path", "body", "name"), DUPLICATED)
def test_a_name_given_twice_in_one_object_is_refused(client, demo_content, path, body, name):
    """RFC 8259 §4: with duplicate names "the behavior of software that receives such an object is unpredictable";
    I-JSON (RFC 7493) forbids them. The last one silently won, so an agent (or anything between it and the site,
    reading the first) and the site could understand one request differently. It is refused, naming the name."""
    response = client.post(path, data=body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    reply = response.json()
    message = reply["error"]["message"] if path == "/ask" else reply["message"]
    assert f"the name {name!r} is given twice" in message, message
    if path == "/ask":
        assert_valid(reply)
        assert reply["error"]["code"] == "INVALID_PARAMETER"
    else:
        assert reply["code"] == "invalid_request"
    # The same names in different objects are not duplicates.
    response, answer = post(client, "/ask", {"query": {"text": "green tea"}, "context": {"text": "green tea"}})
    assert response.status_code == 200, answer


@pytest.mark.parametrize("path", ["/ask", "/agent/converse"])
def test_an_integer_too_long_to_read_is_refused_in_the_protocols_words(client, demo_content, path):
    """An integer of more than 4300 digits is past what Python converts; the refusal quoted the interpreter ("use
    sys.set_int_max_str_digits() to increase the limit"), advice for the site's code, not for an agent. It says
    how long the number is and what the site reads."""
    number = b"9" * 5000
    body = (
        b'{"query": {"text": "tea", "price": ' + number + b"}}"
        if path == "/ask"
        else b'{"capability": "content_search", "query": "tea", "context": {"max_tokens": ' + number + b"}}"
    )
    response = client.post(path, data=body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    reply = response.json()
    message = reply["error"]["message"] if path == "/ask" else reply["message"]
    assert "set_int_max_str_digits" not in message, message
    assert "5000 digits is longer than the 4300" in message, message
    # A long number within the limit is read as usual (a price bound above every product's).
    if path == "/ask":
        response, answer = ask(client, "green tea", query={"itemType": "Product", "price": int("9" * 4300)})
        assert response.status_code == 200, answer
        assert answer["results"]
