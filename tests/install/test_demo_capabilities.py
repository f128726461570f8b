"""The demo shop's capabilities as a visiting agent calls them, with bad, edge and hostile input: through
``POST /agent/converse`` (AHP) and MCP ``tools/call``, against the demo catalogue."""

from __future__ import annotations

import datetime
import json

import pytest
from django.core.management import call_command
from django.utils import timezone

from agent_handshake.models import AgentClient, ApiKey
from demo_site.shop.models import Appointment

pytestmark = pytest.mark.django_db

STRUCTURED = ["application/action-result", "application/data", "text/answer"]


@pytest.fixture
def shop():
    call_command("loaddata", "demo", app_label="shop", verbosity=0)


def converse(client, body, **headers):
    body.setdefault("context", {}).setdefault("accept_types", STRUCTURED)
    return client.post("/agent/converse", json.dumps(body), content_type="application/json", headers=headers)


def tool_call(client, name, arguments, **headers):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return client.post("/mcp", json.dumps(body), content_type="application/json", headers=headers).json()


@pytest.fixture
def bearer():
    agent, _ = AgentClient.objects.get_or_create(name="Visiting agent")
    return {"Authorization": f"Bearer {ApiKey.objects.issue(agent, scopes=['*'])[1]}"}


def open_day(after=1):
    """A day the shop takes bookings, ``after`` days from today or later."""
    day = timezone.localdate() + datetime.timedelta(days=after)
    while day.weekday() in (0, 6):
        day += datetime.timedelta(days=1)
    return day


def booking(**fields):
    data = {"service": "tea-tasting", "date": open_day().isoformat(), "time": "11:00", "name": "Ada"}
    return {"email": "ada@example.com", **data, **fields}


def book(client, bearer, **fields):
    body = {"capability": "book_appointment", "query": "book", "context": {"input": booking(**fields)}}
    return converse(client, body, **bearer)


def quote(client, items):
    return converse(client, {"capability": "custom_quote", "query": "quote", "context": {"input": {"items": items}}})


# --- products named by SKU in words --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "query"),
    [
        ("check_inventory", "Is LK-TEA-00012 in stock?"),  # one digit too many: no SKU of the shop, not LK-TEA-0001
        ("custom_quote", "Quote 5 x LK-TEA-00012"),
        ("custom_quote", "Quote LK-TEA-00012 x 5"),
    ],
)
def test_a_longer_sku_in_words_is_not_read_as_the_shops_sku_it_starts_with(client, shop, capability, query):
    response = converse(client, {"capability": capability, "query": query})
    assert response.json()["status"] == "clarification_needed", response.json()  # which product?


# --- custom_quote: quantities ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "Quote -5 x LK-TEA-0001",
        "Quote \u22125 x LK-TEA-0001",  # a typographic minus sign
        "Quote LK-TEA-0001 x -5",
        "Quote 0 x LK-TEA-0001",
        "Quote -5 Dew of Yame Gyokuro",
        "Quote 0 Dew of Yame Gyokuro",
        "Quote 1.5 x LK-TEA-0001",  # not 5
    ],
)
def test_quote_in_words_refuses_a_quantity_that_is_not_a_positive_whole_number(client, shop, query):
    response = converse(client, {"capability": "custom_quote", "query": query})
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid_request"
    assert response.json()["fields"] == ["input.items.0.quantity"]


def test_quote_caps_each_sku_after_adding_up_its_lines(client, shop):
    """500 of a SKU at most, as for one line of 600: two lines of 400 are 800 of it, refused, not quoted."""
    one_line = quote(client, [{"sku": "LK-TEA-0001", "quantity": 600}])
    assert one_line.status_code == 400
    assert one_line.json()["code"] == "invalid_request"

    two_lines = quote(client, [{"sku": "LK-TEA-0001", "quantity": 400}, {"sku": "LK-TEA-0001", "quantity": 400}])
    assert two_lines.status_code == 400, two_lines.json()
    body = two_lines.json()
    assert body["code"] == "invalid_request"
    assert body["fields"] == ["input.items"]
    assert "LK-TEA-0001" in body["message"]
    assert "500" in body["message"]

    in_words = converse(client, {"capability": "custom_quote", "query": "Quote 400 x LK-TEA-0001, 400 x LK-TEA-0001"})
    assert in_words.status_code == 400, in_words.json()
    assert in_words.json()["fields"] == ["input.items"]

    result = tool_call(client, "custom_quote", {"items": [{"sku": "LK-TEA-0001", "quantity": 400}] * 2})["result"]
    assert result["isError"] is True
    assert "LK-TEA-0001" in result["content"][0]["text"]

    at_the_cap = quote(client, [{"sku": "LK-TEA-0001", "quantity": 250}, {"sku": "LK-TEA-0001", "quantity": 250}])
    assert at_the_cap.status_code == 200, at_the_cap.json()
    assert [line["quantity"] for line in at_the_cap.json()["response"]["payload"]["data"]["lines"]] == [500]


def test_a_json_integer_written_with_a_fraction_of_zero_is_a_whole_number(client, shop, bearer):
    """JSON Schema's integer includes 2.0 (what a client that keeps numbers as floats sends): the capabilities take it
    as 2, not a 500 from Decimal * float, nor a party of 2.0 in the result."""
    response = quote(client, [{"sku": "LK-TEA-0001", "quantity": 2.0}])
    assert response.status_code == 200, response.json()
    line = response.json()["response"]["payload"]["data"]["lines"][0]
    assert (line["quantity"], line["line_total"]) == (2, "76.00")

    result = tool_call(client, "custom_quote", {"items": [{"sku": "LK-TEA-0001", "quantity": 2.0}]})["result"]
    assert result["isError"] is False, result
    assert json.loads(result["content"][1]["text"])["lines"][0]["quantity"] == 2

    booked = book(client, bearer, party_size=2.0)
    assert booked.status_code == 200, booked.json()
    party_size = booked.json()["response"]["payload"]["result"]["party_size"]
    assert (party_size, type(party_size)) == (2, int)  # "party_size": 2, not 2.0


def test_booking_with_an_email_longer_than_its_column_is_refused_not_a_500(client, shop, bearer):
    email = "a" * 250 + "@example.com"  # 262 characters; an email address has at most 254
    response = book(client, bearer, email=email)
    assert response.status_code == 400, response.json()
    assert response.json()["fields"] == ["context.input.email"]
    result = tool_call(client, "book_appointment", booking(email=email), **bearer)["result"]
    assert result["isError"] is True
    assert result["_meta"]["fields"] == ["arguments.email"]
    assert not Appointment.objects.exists()


@pytest.mark.parametrize("name", ["   ", "\t\n", "\u3000"])  # spaces, a tab and a line break, an ideographic space
def test_a_booking_for_a_blank_name_is_refused(client, shop, bearer, name):
    """minLength 1 lets a name of spaces through: the shop would expect nobody in particular."""
    response = book(client, bearer, name=name)
    assert response.status_code == 400, response.json()
    assert response.json()["fields"] == ["input.name"]
    assert not Appointment.objects.exists()


def test_a_booking_on_a_day_the_shop_is_closed_names_the_date(client, shop, bearer):
    """The shop is closed on Sundays and Mondays: the date is what to change, not the time (an agent, or the intent
    page, corrects the field the refusal names)."""
    sunday = timezone.localdate() + datetime.timedelta(days=1)
    while sunday.weekday() != 6:
        sunday += datetime.timedelta(days=1)
    for day in (sunday, sunday + datetime.timedelta(days=1)):
        response = book(client, bearer, date=day.isoformat())
        assert response.status_code == 400, response.json()
        assert response.json()["fields"] == ["input.date"], day
    early = book(client, bearer, time="09:30")
    assert early.status_code == 400
    assert early.json()["fields"] == ["input.time"]
