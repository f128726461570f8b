"""The schema templates front door refuses without growing with what was sent, as every front door does
(tests/concierge/test_refusal_bounds.py, tests/concierge/test_validation_messages.py): a key, a member or a scenario the
client named is quoted cut (``validation.named``), and at most ``MAX_PROBLEMS`` of them are listed, in the message and
in ``fields``, the rest counted ("and N more"). A short name is still quoted exactly, so the refusal stays useful.

Before, an 8000-character payload key came back twice (16 KB), 600 unknown keys or members came back as 600
``fields`` (12.5 KB for a 6.5 KB request), and an unknown scenario's 404 quoted its name whole."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from agent_handshake.concierge.validation import MAX_PROBLEMS, named

pytestmark = pytest.mark.django_db

ENDPOINT = "/schema-templates"
#: A refusal is a sentence and a short list, not a copy of what was sent.
SMALL = 2048
#: A name far longer than any error should quote (a body under the default MAX_REQUEST_BYTES).
LONG = "k" * 8000
#: Many short names: a 6.5 KB body.
MANY = 600
SCHEMA_ID = "check_inventory_v1"


def post(client, body: dict):
    response = client.post(ENDPOINT, json.dumps(body), content_type="application/json")
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return response


def refusal(response, status: int, code: str) -> dict:
    """The error of a bounded refusal with ``status`` and ``code``; the bounds every case shares are checked."""
    assert response.status_code == status, response.content[:500]
    assert len(response.content) < SMALL, len(response.content)
    assert LONG.encode() not in response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert len(error.get("fields", [])) <= MAX_PROBLEMS
    return error


def test_a_long_payload_key_is_named_cut_and_a_short_one_exactly(client, db):
    payload = {"product": "x", LONG: 0, "colour": "red"}
    error = refusal(post(client, {"schema_id": SCHEMA_ID, "payload": payload}), 400, "unknown_key")
    assert error["fields"] == ["payload.colour", f"payload.{named(LONG)}"]
    assert "colour" in error["message"]
    assert named(LONG) in error["message"]
    assert " more" not in error["message"]


def test_many_unknown_payload_keys_are_listed_up_to_the_bound_and_counted(client, db):
    payload = {"product": "x", **{f"k{number:03d}": number for number in range(MANY)}}
    assert 6000 < len(json.dumps(payload)) < 8192  # large, and under the default MAX_REQUEST_BYTES
    error = refusal(post(client, {"schema_id": SCHEMA_ID, "payload": payload}), 400, "unknown_key")
    assert error["fields"] == [f"payload.k{number:03d}" for number in range(MAX_PROBLEMS)]
    assert "k000" in error["message"]
    assert f"and {MANY - MAX_PROBLEMS} more" in error["message"]
    assert f"k{MAX_PROBLEMS:03d}" not in error["message"]


def test_many_unknown_members_of_a_submission_are_listed_up_to_the_bound_and_counted(client, db):
    members = {f"m{number:03d}": number for number in range(MANY)}
    error = refusal(post(client, {"schema_id": SCHEMA_ID, "payload": {"product": "x"}, **members}), 400,
                    "invalid_request")  # fmt: skip
    assert error["fields"] == [f"m{number:03d}" for number in range(MAX_PROBLEMS)]
    assert "m000" in error["message"]
    assert f"and {MANY - MAX_PROBLEMS} more" in error["message"]


def test_a_long_member_of_a_submission_is_named_cut(client, db):
    error = refusal(post(client, {"schema_id": SCHEMA_ID, "payload": {"product": "x"}, LONG: 1, "extra": 2}), 400,
                    "invalid_request")  # fmt: skip
    assert error["fields"] == ["extra", named(LONG)]
    assert "extra" in error["message"]


def test_many_unknown_params_of_a_method_call_are_listed_up_to_the_bound_and_counted(client, db):
    params = {"scenario": "check_inventory", **{f"p{number:03d}": number for number in range(MANY)}}
    error = refusal(post(client, {"method": "get_schema_template", "params": params}), 400, "invalid_request")
    assert error["fields"] == [f"params.p{number:03d}" for number in range(MAX_PROBLEMS)]
    assert f"and {MANY - MAX_PROBLEMS} more" in error["message"]


def test_an_unknown_scenario_in_the_path_is_named_cut(client, db):
    error = refusal(client.get(f"{ENDPOINT}/{quote(LONG)}"), 404, "unknown_scenario")
    assert named(LONG) in error["message"]
    assert "check_inventory" in error["available_scenarios"]
    short = refusal(client.get(f"{ENDPOINT}/no_such_scenario"), 404, "unknown_scenario")
    assert "'no_such_scenario'" in short["message"]


def test_an_unknown_scenario_in_a_method_call_or_schema_id_is_named_cut(client, db):
    call = {"method": "get_schema_template", "params": {"scenario": LONG}}
    error = refusal(post(client, call), 404, "unknown_scenario")
    assert named(LONG) in error["message"]
    # A schema_id's scenario is at most 64 characters (its pattern): named whole.
    error = refusal(post(client, {"schema_id": "no_such_scenario_v1", "payload": {}}), 404, "unknown_scenario")
    assert "'no_such_scenario'" in error["message"]


def test_an_unknown_method_is_named_cut(client, db):
    error = refusal(post(client, {"method": LONG, "params": {}}), 400, "unknown_method")
    assert named(LONG) in error["message"]
    assert error["fields"] == ["method"]
    short = refusal(post(client, {"method": "list_everything", "params": {}}), 400, "unknown_method")
    assert "'list_everything'" in short["message"]
