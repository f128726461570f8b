"""The intent page's form has a text box for every field it cannot offer a picker for, and sends what the person
typed in ``collected_information`` as text. A field whose input is not text (the price quote's ``items``, a list
of lines) was then refused as "not of type 'array'" and asked for again, whatever the person typed: the page listed
"Get a price quote" and no one could get one through it."""

from __future__ import annotations

import pytest

from tests.intentweb.test_intent_page_routing import Visitor

pytestmark = pytest.mark.django_db


def test_a_person_gets_a_price_quote_through_the_pages_form(demo_content):
    visitor = Visitor()
    assert "custom_quote" in visitor.listed
    status, reply = visitor.says("I'd like a price quote")
    assert (status, reply["flow_type"], reply["capability"]) == (200, "information_request", "custom_quote"), reply
    assert reply["required_fields"] == ["items"]
    interaction_id = reply["interaction_id"]
    # Text that names no line is still refused and asked for again, the interaction kept.
    status, reply = visitor.says("Items: some tea", interaction_id=interaction_id,
                                 collected_information={"items": "some tea"})  # fmt: skip
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["items"]), reply
    # What the page's script sends for the form: "Label: value" as the message, the value by the field's name.
    status, reply = visitor.says(
        "Items: 12 x LK-TEA-0001",
        interaction_id=interaction_id,
        collected_information={"items": "12 x LK-TEA-0001"},
    )
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    assert reply["collected_information"]["items"] == [{"sku": "LK-TEA-0001", "quantity": 12}]
