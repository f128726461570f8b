"""Agent traffic insights: the outcome recorded for an error a protocol answers with HTTP 200 (README, "What is
recorded": ``error`` for "an error a protocol reports in a 200 body, such as an MCP tool error"; ``refused`` for
what a 401 or 403 refuses): MCP's errors, and NLWeb's ``/await`` Failure; and the format ``/await`` answers a
finished job in.

Real requests through Django's test client on the demo content and the test app's ``compile_report``;
``recording.flush()`` writes what the requests recorded, and the rows are read back from PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

import agent_handshake
from agent_handshake.concierge import jobs
from agent_handshake.insights import recording
from agent_handshake.models import AgentClient, AgentRequest, ApiKey, Job
from tests.mcp.test_mcp import call as mcp_call
from tests.mcp.test_mcp import rpc
from tests.nlweb.test_nlweb import post
from tests.nlweb_schema import assert_valid

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_buffer")]


def the_row() -> tuple[str, str, str, int]:
    recording.flush()
    rows = list(AgentRequest.objects.values_list("protocol", "capability", "outcome", "status"))
    assert len(rows) == 1, rows
    return rows[0]


def issue(name: str = "Recorded agent") -> str:
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


# --- MCP: JSON-RPC errors and tool errors answered with HTTP 200 --------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        pytest.param("tools/call", {"name": "no_such_tool", "arguments": {}}, -32602, id="unknown tool"),
        pytest.param("no/such/method", {}, -32601, id="unknown method"),
        pytest.param("resources/read", {"uri": "http://testserver/no/such/page/"}, -32002, id="unknown resource"),
        pytest.param("resources/list", {"cursor": "zz"}, -32602, id="bad cursor"),
    ],
)
def test_a_json_rpc_error_answered_with_200_is_recorded_as_an_error(client, demo_content, method, params, code):
    response, body = rpc(client, method, params)
    assert response.status_code == 200
    assert body["error"]["code"] == code, body
    # A made-up tool name is not kept as a capability (as a made-up name in a path is not).
    assert the_row() == ("mcp", "", "error", 200)


def test_a_json_rpc_error_in_a_batch_is_recorded_as_an_error(client, demo_content):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}]
    response = client.post("/mcp", json.dumps(batch), content_type="application/json")
    assert response.status_code == 200
    assert response.json()[0]["error"]["code"] == -32601
    assert the_row() == ("mcp", "", "error", 200)


def test_a_tool_refused_for_want_of_credentials_is_recorded_as_refused(client, demo_content):
    response, body = mcp_call(client, "book_appointment", {"query": "Book a tea tasting"})
    assert response.status_code == 200
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["code"] == "auth_required"
    # What AHP's 401 records, for the same refusal in a 200 body.
    assert the_row() == ("mcp", "book_appointment", "refused", 200)


def test_a_tool_error_for_a_bad_argument_is_recorded_as_an_error(client, demo_content):
    response, body = mcp_call(client, "content_search", {"query": 5})
    assert response.status_code == 200
    assert body["result"]["isError"] is True
    assert the_row() == ("mcp", "content_search", "error", 200)


def test_the_job_status_tools_errors_are_recorded(client, demo_content):
    response, body = mcp_call(client, "job_status", {"job_id": "nope"})
    assert (response.status_code, body["result"]["isError"]) == (200, True)
    assert the_row()[2:] == ("refused", 200)  # no credentials: AuthRequired
    AgentRequest.objects.all().delete()
    response, body = mcp_call(client, "job_status", {"job_id": "nope"}, HTTP_AUTHORIZATION=f"Bearer {issue()}")
    assert (response.status_code, body["result"]["isError"]) == (200, True)
    assert the_row()[2:] == ("error", 200)  # no such job: NotFound


def test_a_capabilitys_own_refusal_stays_refused_and_an_answer_a_success(client, demo_content):
    """Only what the front door turns into a tool error is recorded as ``error``; a refusal the call itself made (the
    capability refused its input) is still recorded as that, and an answer as a success."""
    response, body = mcp_call(client, "check_inventory", {"query": "stock", "product": 5})
    assert (response.status_code, body["result"]["isError"]) == (200, True), body
    assert the_row() == ("mcp", "check_inventory", "refused", 200)
    AgentRequest.objects.all().delete()
    response, body = mcp_call(client, "content_search", {"query": "How should I brew hojicha?"})
    assert (response.status_code, body["result"]["isError"]) == (200, False)
    assert the_row() == ("mcp", "content_search", "success", 200)


# --- NLWeb /await ------------------------------------------------------------------------------------------------


def promise(client, secret: str, **input) -> str:
    """The token of a ``compile_report`` job started through ``/ask``."""
    query = {"text": "A report", "capability": "compile_report", "input": {"topic": "oolong harvests", **input}}
    response, body = post(client, "/ask", {"query": query}, Authorization=f"Bearer {secret}")
    assert response.status_code == 202, body
    return body["promise"]["token"]


def test_an_await_failure_is_recorded_as_an_error_of_the_jobs_capability(client, demo_content):
    secret = issue()
    auth = {"Authorization": f"Bearer {secret}"}
    failed = promise(client, secret, fail=True)
    jobs.run(failed)  # what the worker does
    assert Job.objects.get(pk=failed).status == Job.Status.FAILED
    recording.discard()
    response, body = post(client, "/await", {"promise_token": failed, "action": "checkin"}, **auth)
    assert (response.status_code, body["error"]["code"]) == (200, "JOB_FAILED"), body
    assert the_row() == ("nlweb", "compile_report", "error", 200)

    AgentRequest.objects.all().delete()
    queued = promise(client, secret)
    recording.discard()
    response, body = post(client, "/await", {"promise_token": queued, "action": "cancel"}, **auth)
    assert (response.status_code, body["error"]["code"]) == (200, "CANCELLED"), body
    assert the_row() == ("nlweb", "compile_report", "error", 200)


def test_an_await_promise_and_answer_are_recorded_with_the_jobs_capability(client, demo_content):
    secret = issue()
    auth = {"Authorization": f"Bearer {secret}"}
    token = promise(client, secret)
    recording.discard()
    response, _ = post(client, "/await", {"promise_token": token}, **auth)
    assert response.status_code == 202
    assert the_row() == ("nlweb", "compile_report", "success", 202)
    AgentRequest.objects.all().delete()
    jobs.run(token)
    response, _ = post(client, "/await", {"promise_token": token}, **auth)
    assert response.status_code == 200
    assert the_row() == ("nlweb", "compile_report", "success", 200)
    AgentRequest.objects.all().delete()
    stranger = {"Authorization": f"Bearer {issue('Stranger')}"}
    response, _ = post(client, "/await", {"promise_token": token}, **stranger)
    assert response.status_code == 403
    # Against the capability it asked about, as a refusal before a call is (invocation.authorize).
    assert the_row() == ("nlweb", "compile_report", "refused", 403)


@pytest.fixture
def wrapping(registries):
    """The same capability answering at once (``wrap_now``) and as an async job (``wrap_later``), with an answer
    text (the test app's ``compile_report`` has none), so an Answer's summary and ``content`` can be compared."""

    def wrap(invocation):
        return agent_handshake.Outcome({"item": invocation.input["item"], "wrapped": True}, answer="Wrapped.")

    for name, action_type in (("wrap_now", "action"), ("wrap_later", "async")):
        agent_handshake.capability(
            name,
            description=f"Gift-wrap an item ({action_type}).",
            action_type=action_type,
            input_schema={"type": "object", "required": ["item"], "properties": {"item": {"type": "string"}}},
            output_schema={"type": "object"},
        )(wrap)


def test_await_answers_a_finished_job_in_the_format_the_caller_prefers(client, demo_content, wrapping):
    """§3.3 ``prefer`` says how a response is formatted and delivered; ``/await`` read none of it and answered
    every finished job as ``conv_search``. It now reads ``prefer`` as ``/ask`` does: a ``chatgpt_app`` client gets
    ``content`` (the outcome's answer, then the item in words) and ``structuredData``, as ``/ask`` gives a
    synchronous capability's answer; ``mode: summarize`` adds ``_meta.summary``; ``streaming`` streams it."""
    auth = {"Authorization": f"Bearer {issue()}"}
    query = {"text": "Wrap it", "input": {"item": "LK-TEA-0001"}}
    response, accepted = post(client, "/ask", {"query": {**query, "capability": "wrap_later"}}, **auth)
    assert response.status_code == 202, accepted
    token = accepted["promise"]["token"]
    jobs.run(token)  # what the worker does
    wait = {"promise_token": token, "action": "checkin"}

    for prefer in ({"response_format": "chatgpt_app"}, {"mode": "summarize"}, {}):
        response, done = post(client, "/await", {**wait, "prefer": prefer}, **auth)
        assert response.status_code == 200, done
        assert_valid(done)
        _, now = post(client, "/ask", {"query": {**query, "capability": "wrap_now"}, "prefer": prefer}, **auth)
        # The job's Answer is the one /ask gives the same capability answering at once, in the same format.
        assert done == json.loads(json.dumps(now).replace("wrap_now", "wrap_later")), prefer

    _, app = post(client, "/await", {**wait, "prefer": {"response_format": "chatgpt_app"}}, **auth)
    assert (app["_meta"]["response_type"], app["_meta"]["response_format"]) == ("answer", "chatgpt_app")
    assert "results" not in app
    [item] = app["structuredData"]
    assert (item["name"], item["description"]) == ("wrap_later", "Wrapped.")
    assert item["result"] == {"item": "LK-TEA-0001", "wrapped": True}
    assert app["content"][0] == {"type": "text", "text": "Wrapped."}
    assert app["_meta"]["summary"] == "Wrapped."

    _, plain = post(client, "/await", wait, **auth)  # no prefer: conv_search, as before
    assert plain["_meta"]["response_format"] == "conv_search"
    assert [result["name"] for result in plain["results"]] == ["wrap_later"]
    assert "summary" not in plain["_meta"]

    _, summarized = post(client, "/await", {**wait, "prefer": {"mode": "summarize"}}, **auth)
    assert (summarized["_meta"]["summary"], len(summarized["results"])) == ("Wrapped.", 1)

    listed = {**wait, "prefer": {"response_format": ["widget_v2", "conversational_search"]}}
    _, search = post(client, "/await", listed, **auth)
    assert search["_meta"]["response_format"] == "conv_search"

    response, streamed = post(client, "/await", {**wait, "prefer": {"streaming": True}}, **auth)
    assert response.streaming
    assert streamed == plain


@pytest.mark.parametrize(
    ("prefer", "field"),
    [
        ({"response_format": 5}, "prefer.response_format"),
        ({"streaming": "yes"}, "prefer.streaming"),
        ("chatgpt_app", "prefer"),
    ],
)
def test_a_bad_prefer_on_await_is_a_failure_with_a_400(client, demo_content, prefer, field):
    secret = issue()
    token = promise(client, secret)
    body = {"promise_token": token, "prefer": prefer}
    response, failure = post(client, "/await", body, Authorization=f"Bearer {secret}")
    assert response.status_code == 400, failure
    assert failure["error"]["code"] == "INVALID_PARAMETER"
    assert failure["error"]["details"]["fields"] == [field]
