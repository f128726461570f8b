"""A capability's input that fails its JSON Schema is refused in words a caller can act on, without sending the
value back: jsonschema's own messages begin with the value they refuse ("'xxxx…' is too long", "{…} is not of
type 'string'"), so a 50 KB value came back whole in the error, once per failing keyword, on every front door.
The concierge now says what is wrong from the field's path, the keyword and the schema's own numbers and names
(tests/ahp/test_mode3.py, tests/openapi/test_openapi.py and tests/intentweb/test_intentweb.py cover the valid calls)."""

from __future__ import annotations

import json

import pytest

from tests.ahp.test_mode3 import converse
from tests.intentweb.test_intentweb import Agent

pytestmark = pytest.mark.django_db

NAME = "label_parcel"
#: A refusal is a sentence or two and a list of fields, not a copy of what was sent.
SMALL = 4096
#: Each invalid value is about this large: a body far over the default MAX_REQUEST_BYTES, which the tests lift.
LARGE = 50_000
COLOURS = ["red", "green", "blue"]
SHADES = [f"shade-{number:03d}" for number in range(200)]

INPUT_SCHEMA = {
    "type": "object",
    "required": ["code"],
    "additionalProperties": False,
    "properties": {
        "code": {"type": "string", "maxLength": 10, "description": "The parcel's code"},
        "colour": {"enum": COLOURS},
        "shade": {"enum": SHADES},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
        "reference": {"type": "string", "pattern": "^LK-\\d{5}$"},
        "weight": {"type": "integer", "maximum": 30},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
}

#: (what is sent besides a valid code, the words the refusal must contain): each value about LARGE bytes.
CASES = {
    "too long": ({"code": "x" * LARGE}, ["code", "at most 10 characters"]),
    "an object for a string": (
        {"code": {f"key{index:05d}": "v" * 40 for index in range(LARGE // 50)}},
        ["code", "must be a string", "object"],
    ),
    "not in the enum": ({"colour": "y" * LARGE}, ["colour", "must be one of: red, green, blue"]),
    "not in a long enum": ({"shade": "y" * LARGE}, ["shade", "must be one of: shade-000, shade-001", "more"]),
    "too many items": ({"tags": ["t" * 8] * (LARGE // 10)}, ["tags", "at most 3 items"]),
    "many wrong items": ({"tags": [index for index in range(LARGE // 6)]}, ["tags", "at most 3 items"]),
    "not the pattern": ({"reference": "z" * LARGE}, ["reference", "must match", "LK-"]),
    "a number too large": ({"weight": int("9" * 4000)}, ["weight", "must be at most 30"]),
    "under a long key": ({"extra": {"k" * LARGE: "not a number"}}, ["extra.kkkk", "must be an integer"]),
    "a NUL under a long key": ({"extra": {"k" * LARGE: "\x00"}}, ["extra.kkkk", "NUL"]),
}


@pytest.fixture
def parcels(capability_keeping_inputs, settings):
    """``label_parcel``, a query capability anyone may call, and requests large enough to carry LARGE values."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "MAX_REQUEST_BYTES": 1_000_000}
    return capability_keeping_inputs(
        {"printed": True},
        name=NAME,
        description="Prints a shipping label for a parcel.",
        action_type="query",
        intent="Print a shipping label for a parcel",
        input_schema=INPUT_SCHEMA,
        output_schema={"type": "object"},
    )


def ahp(client, data):
    response = converse(client, {"capability": NAME, "query": "Print a label", "context": {"input": data}})
    return response.status_code, response.content, response.json()["message"]


def openapi(client, data):
    body = json.dumps({"query": "Print a label", **data})
    response = client.post(f"/capabilities/{NAME}", body, content_type="application/json")
    return response.status_code, response.content, response.json()["message"]


def mcp(client, data):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": NAME, "arguments": data}}
    response = client.post("/mcp", json.dumps(body), content_type="application/json",
                           HTTP_MCP_PROTOCOL_VERSION="2025-06-18")  # fmt: skip
    reply = response.json()
    if "error" in reply:  # the body itself refused before any tool runs (an unstorable string): a JSON-RPC error
        return response.status_code, response.content, reply["error"]["message"]
    assert reply["result"]["isError"] is True, reply  # a tool's refusal is a result the model reads
    return response.status_code, response.content, reply["result"]["content"][0]["text"]


def nlweb(client, data):
    body = json.dumps({"query": {"text": "Print a label", "capability": NAME, "input": data}})
    response = client.post("/ask", body, content_type="application/json")
    return response.status_code, response.content, response.json()["error"]["message"]


FRONT_DOORS = {"AHP": ahp, "OpenAPI": openapi, "MCP": mcp, "NLWeb": nlweb}


@pytest.mark.parametrize("door", FRONT_DOORS)
@pytest.mark.parametrize("case", CASES)
def test_an_invalid_value_is_named_not_echoed(client, parcels, door, case):
    sent, words = CASES[case]
    status, content, message = FRONT_DOORS[door](client, {"code": "P-1", **sent})
    if door == "MCP":  # JSON-RPC: the refusal is in the body, with HTTP 200 (or a 4xx for a body refused whole)
        assert status == 200 or 400 <= status < 500, content[:500]
    else:
        assert 400 <= status < 500, content[:500]
    assert len(content) < SMALL, (len(content), content[:500])
    for word in words:
        assert word in message, message
    assert parcels == []


def test_every_field_is_named_once_and_the_refusal_stays_small(client, parcels):
    """All of them at once: a few hundred kilobytes of invalid input, a refusal of a few kilobytes."""
    data = {"code": "P-1"}
    for case, (sent, _) in CASES.items():
        if case != "a NUL under a long key":  # refused before any schema is read
            data.update(sent)
    status, content, _ = ahp(client, data)
    assert status == 400
    assert len(content) < SMALL, (len(content), content[:500])
    fields = json.loads(content)["fields"]
    assert {"context.input.code", "context.input.colour", "context.input.tags"} <= set(fields), fields
    assert len(fields) <= 10


@pytest.mark.parametrize("case", ["too long", "an object for a string"])
def test_intentweb_asks_again_without_the_value(client, demo_content, parcels, registries, case):
    """IntentWeb asks again for a required field whose value its schema refuses (a 200 information_request that
    names it), and refuses a value of a JSON type the field does not take (a 400 naming it, nothing changed); either
    way the reply quotes no more than a cell of the value."""
    for capability in list(registries[1]):
        if capability.action_type and capability.name != NAME:
            del registries[1]._capabilities[capability.name]
    sent, _ = CASES[case]
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Print a shipping label for a parcel")
    assert status == 200, reply
    assert reply["flow_type"] == "information_request", reply
    status, reply = agent.send("information_response", "here", collected_information={"code": "P-1", **sent})
    assert len(json.dumps(reply)) < SMALL, reply
    field = next(iter(sent))
    assert field in reply["message"]
    if case == "an object for a string":
        assert (status, reply["flow_type"]) == (400, "error"), reply
        assert reply["fields"] == [f"collected_information.{field}"]
    else:
        assert (status, reply["flow_type"]) == (200, "information_request"), reply
        assert field not in reply["collected_information"]
    assert parcels == []
