"""The demo shop's capabilities as a visiting agent calls them, with bad, edge and hostile input: through
``POST /agent/converse`` (AHP) and MCP ``tools/call``, against the demo catalogue."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

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


def quote(client, items):
    return converse(client, {"capability": "custom_quote", "query": "quote", "context": {"input": {"items": items}}})


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
