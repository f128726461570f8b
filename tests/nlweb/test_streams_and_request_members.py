"""NLWeb v0.54 ``/ask`` and ``/await``: a streamed capability answer that delivers its summary, a retry that changes
only the delivery, a ``meta.session_context`` that is not an object, and a long ``query.site`` list read whole (in
process, Django's test client through the whole middleware stack, the real embedding model and PostgreSQL)."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import Job
from tests.nlweb.test_item_types_and_streams import report_key  # noqa: F401 - a fixture
from tests.nlweb.test_nlweb import parse_events, post
from tests.nlweb_schema import assert_valid

pytestmark = pytest.mark.django_db

IN_STOCK = {"text": "Is it in stock?", "capability": "check_inventory", "input": {"product": "LK-TEA-0001"}}


def test_a_streamed_capability_answer_delivers_its_summary_as_content(client, demo_content):
    """§8.4: "events must eventually deliver the full JSON structure". A capability's Answer in ``chatgpt_app``
    has the outcome's answer as its first ``content`` item; streamed, that item was never sent (only each result's
    own ``content``), where a question's stream sends its summary as the last ``content`` event. A ``summarize``
    stream in ``conv_search`` likewise had no ``content`` event with the summary a question's stream has."""
    body = {"query": IN_STOCK, "prefer": {"response_format": "chatgpt_app"}}
    _, whole = post(client, "/ask", body)
    assert_valid(whole)
    summary = {"type": "text", "text": whole["_meta"]["summary"]}
    assert whole["content"][0] == summary
    response, streamed = post(client, "/ask", {**body, "prefer": {**body["prefer"], "streaming": True}})
    assert response.streaming
    assert_valid(streamed)
    assert streamed["structuredData"] == whole["structuredData"]
    assert streamed["content"] == [*whole["content"][1:], summary]  # as a question's stream orders them

    listed = {"query": IN_STOCK, "prefer": {"mode": "summarize", "streaming": True}}
    response = client.post("/ask", data=json.dumps(listed), content_type="application/json")
    events = parse_events(b"".join(response.streaming_content))
    assert ("content", summary) in events, events
    assert [name for name, _ in events][-3:] == ["content", "complete", "end"]


def test_a_retry_that_changes_only_the_delivery_is_the_same_request(client, demo_content, report_key):  # noqa: F811
    """``prefer.streaming`` says how the answer is delivered (as ``Accept: text/event-stream`` does), not what is
    asked. A client whose stream broke and that retried the same call as JSON, with the same Idempotency-Key, was
    refused (422, "used for a different request"): it could not learn the first call's Promise token, and a retry
    under a new key would start the job twice. It now gets the first call's answer."""
    auth = {"Authorization": f"Bearer {report_key}", "Idempotency-Key": "report-oolong-1"}
    body = {"query": {"text": "On oolong", "capability": "compile_report", "input": {"topic": "oolong harvests"}}}
    first, promise = post(client, "/ask", {**body, "prefer": {"streaming": True}}, **auth)
    assert first.status_code == 202
    assert promise["_meta"]["response_type"] == "promise"
    again, replayed = post(client, "/ask", body, **auth)
    assert again.status_code == 202, replayed
    assert replayed["promise"]["token"] == promise["promise"]["token"]
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(capability="compile_report").count() == 1
    # What is asked still counts: another topic under the same key is another request.
    other = {"query": {**body["query"], "input": {"topic": "sencha"}}}
    refused, failure = post(client, "/ask", other, **auth)
    assert refused.status_code == 422, failure
    assert failure["error"]["code"] == "CONFLICT"


@pytest.mark.parametrize("value", [[], "", 0, False, "conv_1", [{"conversation_id": "conv_1"}]])
@pytest.mark.parametrize("path", ["/ask", "/await"])
def test_a_session_context_that_is_not_an_object_is_refused_whatever_it_is(client, demo_content, value, path):
    """``meta.session_context`` is an object (§3.4). A truthy non-object was refused (400) but an empty list, an
    empty string, 0 or false was read as no session context: the client's conversation was silently dropped."""
    body = {"query": {"text": "green tea"}} if path == "/ask" else {"promise_token": "promise_xyz"}
    response, failure = post(client, path, {**body, "meta": {"version": "0.54", "session_context": value}})
    assert response.status_code == 400, failure
    assert_valid(failure)
    assert failure["error"]["code"] == "INVALID_PARAMETER"
    assert failure["error"]["details"]["fields"] == ["meta.session_context"]


def test_a_long_list_of_sites_is_not_cut_to_its_last_twenty(client, demo_content):
    """``query.site`` as a list names the corpora to search. A list of more than 20 kept only its last 20
    entries, silently: this site named first among 21 was dropped, and the answer said this agent does not search
    it (no results). Every entry is now read, up to a bound that is refused with a 400, not cut."""
    sites = ["testserver", *[f"other-{n}.example" for n in range(20)]]
    response, body = post(client, "/ask", {"query": {"text": "green tea", "site": sites}})
    assert response.status_code == 200, body
    assert_valid(body)
    assert body["results"]
    assert "warnings" not in body["_meta"], body["_meta"]
    response, failure = post(client, "/ask", {"query": {"text": "green tea", "site": ["a.example"] * 101}})
    assert response.status_code == 400, failure
    assert failure["error"]["details"]["fields"] == ["query.site"]
