"""What a capability's handler receives: input read from free text, and structured input as its schema types it."""

from __future__ import annotations

import pytest

from tests.ahp.test_mode3 import bearer, converse, issue

pytestmark = pytest.mark.django_db


@pytest.fixture
def received(capability_keeping_inputs):
    """A capability that keeps what it was given."""
    return capability_keeping_inputs(
        {"ok": True},
        name="reserve",
        description="Reserves seats for a party.",
        action_type="action",
        input_schema={
            "type": "object",
            "required": ["reference"],
            "properties": {
                "party": {"type": "integer", "minimum": 1},
                "reference": {"type": "string", "pattern": "^LK-\\d{5}$"},
                "lines": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"quantity": {"type": "integer"}}},
                },
                "share": {"type": "number"},
            },
        },
        output_schema={"type": "object"},
    )


def test_whole_numbers_sent_as_2_0_reach_the_handler_as_integers(client, received):
    """JSON Schema counts 2.0 as an integer, so it passes validation; the handler got a float (a demo capability
    answered "party_size": 2.0, another multiplied a price by it and failed). Where the schema says integer, the
    handler now gets an int; a number stays as sent."""
    _, secret = issue()
    data = {"party": 2.0, "reference": "LK-10001", "lines": [{"quantity": 3.0}], "share": 1.0}
    response = converse(client, {"capability": "reserve", "query": "go", "context": {"input": data}}, **bearer(secret))
    assert response.status_code == 200, response.json()
    (given,) = received
    assert given == data
    assert type(given["party"]) is int
    assert type(given["lines"][0]["quantity"]) is int
    assert type(given["share"]) is float


def test_a_pattern_is_not_read_from_inside_a_longer_reference(client, received):
    """Read from free text, ``^LK-\\d{5}$`` found "LK-10001" inside "LK-1000100": the capability ran on someone
    else's reference. A reference is now read only where it stands alone, and the agent is asked for it."""
    _, secret = issue()
    response = converse(client, {"capability": "reserve", "query": "2 seats on reference LK-1000100"}, **bearer(secret))
    assert received == []
    assert response.json()["status"] == "clarification_needed", response.json()
    assert "reference" in response.json()["clarification"]["question"]
    response = converse(client, {"capability": "reserve", "query": "Reserve two seats, reference LK-10001."},
                        **bearer(secret))  # fmt: skip
    assert response.status_code == 200, response.json()
    assert received[-1]["reference"] == "LK-10001"
