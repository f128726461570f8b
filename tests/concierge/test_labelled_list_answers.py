"""A labelled answer to the concierge's question for a MODE3 capability's missing input ("items: 12 x LK-TEA-0001,
3 x LK-TEA-0002" for the demo's price quote, whose ``items`` is a list of lines): the value of a field that is not
text is read as the capability reads a message (its extractor, then the schema's own rules); only a text field
takes the words as written. The labelled value was taken as the raw string and refused for its type, so an agent
that named the field it was asked for could never answer. Through each door that asks: AHP's clarification,
MCP's missing_field, NLWeb's elicitation and IntentWeb's information_request."""

from __future__ import annotations

import pytest

from tests.ahp.test_mode3 import STRUCTURED
from tests.concierge.test_clarification_answers import converse
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import call
from tests.nlweb.test_nlweb import post

pytestmark = pytest.mark.django_db

QUERY = "A quote, please"
LINES = "12 x LK-TEA-0001, 3 x LK-TEA-0002"
LABELLED = f"items: {LINES}"
WANTED = [{"sku": "LK-TEA-0001", "quantity": 12}, {"sku": "LK-TEA-0002", "quantity": 3}]


def quoted(lines: list[dict]) -> list[dict]:
    return [{"sku": line["sku"], "quantity": line["quantity"]} for line in lines]


@pytest.mark.parametrize("answer", [LABELLED, LINES, f"Items = {LINES}."])
def test_ahp_a_labelled_list_answer_is_read_as_the_capability_reads_a_message(client, demo_content, answer):
    response, body = converse(client, {"capability": "custom_quote", "query": QUERY})
    assert (response.status_code, body["status"]) == (200, "clarification_needed"), body
    response, body = converse(
        client,
        {
            "capability": "custom_quote",
            "query": QUERY,
            "session_id": body["session_id"],
            "clarification": answer,
            "context": {"accept_types": STRUCTURED},
        },
    )
    assert (response.status_code, body["status"]) == (200, "success"), body
    assert quoted(body["response"]["payload"]["data"]["lines"]) == WANTED


@pytest.mark.parametrize("answer", [LABELLED, LINES])
def test_mcp_a_labelled_list_answer_to_missing_field_is_read(client, demo_content, answer):
    _, body = call(client, "custom_quote", {"query": QUERY})
    assert body["result"]["_meta"]["code"] == "missing_field", body
    assert body["result"]["_meta"]["missing"] == ["items"]
    session_id = body["result"]["_meta"]["session_id"]
    response, body = call(client, "custom_quote", {"query": answer, "session_id": session_id}, version="2025-06-18")
    assert response.status_code == 200
    assert body["result"]["isError"] is False, body
    assert quoted(body["result"]["structuredContent"]["lines"]) == WANTED


@pytest.mark.parametrize("answer", [LABELLED, LINES])
def test_nlweb_a_labelled_list_answer_to_an_elicitation_is_read(client, demo_content, answer):
    response, body = post(client, "/ask", {"query": {"text": QUERY, "capability": "custom_quote"}})
    assert body["_meta"]["response_type"] == "elicitation", body
    assert body["elicitation"]["questions"][0]["id"] == "items"
    conversation = body["_meta"]["session_context"]["conversation_id"]
    response, body = post(
        client,
        "/ask",
        {
            "query": {"text": answer, "capability": "custom_quote"},
            "meta": {"session_context": {"conversation_id": conversation}},
        },
    )
    assert response.status_code == 200, body
    assert quoted(body["results"][0]["result"]["lines"]) == WANTED, body


def ask_intentweb_for_items(client) -> Agent:
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I'd like a price quote")
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["items"]), reply
    return agent


@pytest.mark.parametrize(
    "answer",
    [LABELLED, LINES, f"note: for the office\nItems: {LINES}", "items: 12 x LK-TEA-0001; 3 x LK-TEA-0002."],
)
def test_intentweb_a_labelled_list_answer_to_an_information_request_is_read(client, demo_content, answer):
    agent = ask_intentweb_for_items(client)
    status, reply = agent.send("information_response", answer)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
    assert quoted(reply["result"]["lines"]) == WANTED, reply


def test_intentweb_a_labelled_value_that_is_no_list_is_refused_naming_the_field(client, demo_content):
    agent = ask_intentweb_for_items(client)
    status, reply = agent.send("information_response", "items: the usual")
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["items"]), reply
    assert "not a valid items" in reply["message"], reply
    # The question stands; a right answer still is one.
    status, reply = agent.send("information_response", LABELLED)
    assert (status, reply["flow_type"]) == (200, "execution_result"), reply
