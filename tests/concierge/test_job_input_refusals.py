"""A capability's refusal of its input (``ActionFailed`` naming ``fields``) reaches the agent the same way whether
the capability answers at once or runs as an async job on a worker: the polled job and its callback name the
fields, as the synchronous 400 does."""

from __future__ import annotations

import json

import pytest

import agent_handshake
from agent_handshake import tasks
from agent_handshake.models import AgentClient, Job
from tests.ahp.test_mode3 import bearer, converse, issue
from tests.concierge.test_callbacks import Receiver

pytestmark = pytest.mark.django_db

MESSAGE = "The shop takes bookings Tuesday to Saturday, 10:00 to 17:00."
INPUT_SCHEMA = {
    "type": "object",
    "required": ["time"],
    "properties": {"time": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}},
}


def now_and_later(stem: str, description: str, input_schema: dict, handler) -> None:
    """Declare ``handler`` twice: ``<stem>_now``, answering at once, and ``<stem>_later``, an async job."""
    for name, action_type in ((f"{stem}_now", "action"), (f"{stem}_later", "async")):
        agent_handshake.capability(
            name,
            description=f"{description} ({action_type}).",
            action_type=action_type,
            input_schema=input_schema,
            output_schema={"type": "object"},
        )(handler)


@pytest.fixture
def booking_capabilities(registries):
    """The same booking capability, answering at once ("book_now") and as an async job ("book_later")."""

    def book(invocation):
        if not "10:00" <= invocation.input["time"] < "17:00":
            raise agent_handshake.ActionFailed(MESSAGE, fields=["input.time"])
        return agent_handshake.Outcome({"time": invocation.input["time"]}, answer="Booked.")

    now_and_later("book", "Book a slot", INPUT_SCHEMA, book)


def test_an_async_jobs_input_refusal_names_its_fields_in_the_poll_and_the_callback(client, booking_capabilities):
    _, secret = issue()
    request = {"query": "Book a slot", "context": {"input": {"time": "08:00"}}}

    refused = converse(client, {**request, "capability": "book_now"}, **bearer(secret))
    assert refused.status_code == 400, refused.json()
    assert (refused.json()["message"], refused.json()["fields"]) == (MESSAGE, ["input.time"])

    hook = Receiver().start()
    later = {**request, "capability": "book_later", "context": {**request["context"], "callback_url": hook.url()}}
    accepted = converse(client, later, **bearer(secret))
    assert accepted.status_code == 202, accepted.json()
    job_id = accepted.json()["session_id"]
    assert tasks.run_job(job_id) == Job.Status.FAILED  # the worker's task, run here

    polled = client.get(accepted.json()["poll"], headers=bearer(secret)).json()
    assert polled["status"] == "failed"
    assert polled["error"] == {"code": "invalid_request", "message": MESSAGE, "fields": ["input.time"]}

    try:
        tasks.deliver_callback(job_id)
    finally:
        hook.stop()
    assert json.loads(hook.requests[0]["body"])["error"] == polled["error"]


@pytest.fixture
def refusing_capabilities(registries):
    """Capabilities that refuse with the app's own domain errors (not ``ActionFailed``), at once ("*_now") and as
    async jobs ("*_later"), writing a row before they refuse."""
    from agent_handshake.concierge import errors

    refusals = {
        "invalid": lambda: errors.InvalidInput(MESSAGE, fields=["input.time"]),
        "conflict": lambda: errors.Conflict("That slot was booked a moment ago.", fields=["input.time"]),
    }

    def book(invocation):
        AgentClient.objects.create(name="written before the refusal")
        raise refusals[invocation.input["kind"]]()

    schema = {**INPUT_SCHEMA, "properties": {**INPUT_SCHEMA["properties"], "kind": {"enum": list(refusals)}}}
    now_and_later("refuse", "Refuse a booking", schema, book)


@pytest.mark.parametrize(("kind", "status"), [("invalid", 400), ("conflict", 422)])
def test_a_domain_error_raised_in_a_job_is_its_refusal_at_once_not_a_crash_retried(
    client, refusing_capabilities, kind, status
):
    """A capability may refuse with one of the concierge's own errors (errors.InvalidInput, errors.Conflict...),
    which the synchronous path shows as the refusal it is. A job that raises one ends at once (no retries: the
    same input is refused again), failed with the error's code, message and details, and its writes undone."""
    _, secret = issue()
    request = {"query": "Book a slot", "context": {"input": {"time": "08:00", "kind": kind}}}
    refused = converse(client, {**request, "capability": "refuse_now"}, **bearer(secret))
    assert refused.status_code == status, refused.json()
    expected = {key: refused.json()[key] for key in ("code", "message", "fields")}
    clients = AgentClient.objects.count()

    accepted = converse(client, {**request, "capability": "refuse_later"}, **bearer(secret))
    assert accepted.status_code == 202, accepted.json()
    job_id = accepted.json()["session_id"]
    assert tasks.run_job(job_id) == Job.Status.FAILED  # not queued again for another attempt
    job = Job.objects.get(pk=job_id)
    assert job.attempts == 1
    assert job.error == expected
    assert AgentClient.objects.count() == clients  # the handler's write was rolled back
    polled = client.get(accepted.json()["poll"], headers=bearer(secret)).json()
    assert (polled["status"], polled["error"]) == ("failed", expected)


def test_mcp_job_status_names_a_refused_jobs_fields_as_the_synchronous_tool_error_does(client, booking_capabilities):
    from tests.mcp.test_mcp import call

    _, secret = issue()
    auth = {"version": "2025-06-18", "HTTP_AUTHORIZATION": f"Bearer {secret}"}
    arguments = {"query": "Book a slot", "time": "08:00"}
    _, refused = call(client, "book_now", arguments, **auth)
    assert refused["result"]["isError"] is True
    assert refused["result"]["_meta"] == {"code": "invalid_request", "fields": ["input.time"]}

    _, accepted = call(client, "book_later", arguments, **auth)
    job_id = accepted["result"]["structuredContent"]["job_id"]
    assert tasks.run_job(job_id) == Job.Status.FAILED
    _, status = call(client, "job_status", {"job_id": job_id}, **auth)
    structured = status["result"]["structuredContent"]
    assert structured["status"] == "failed"
    assert structured["error"] == {"code": "invalid_request", "message": MESSAGE, "fields": ["input.time"]}
    assert json.loads(status["result"]["content"][1]["text"]) == structured  # the same, for clients of any revision


def test_a_schema_templates_callback_names_a_refused_jobs_fields_as_the_synchronous_400_does(
    client, booking_capabilities
):
    from tests.schema_templates.test_schema_templates import post

    _, secret = issue()
    refused, body = post(client, {"schema_id": "book_now_v1", "payload": {"time": "08:00"}}, secret)
    assert refused.status_code == 400, body
    assert body["error"] == {"code": "invalid_request", "message": MESSAGE, "fields": ["payload.time"]}

    hook = Receiver().start()
    try:
        submission = {"schema_id": "book_later_v1", "payload": {"time": "08:00"}, "callback_url": hook.url()}
        accepted, job = post(client, submission, secret)
        assert accepted.status_code == 202, job
        assert tasks.run_job(job["job_id"]) == Job.Status.FAILED
        tasks.deliver_callback(job["job_id"])
    finally:
        hook.stop()
    posted = json.loads(hook.requests[0]["body"])
    assert (posted["status"], posted["error"]) == ("failed", body["error"])


def test_intentwebs_report_and_callback_name_a_refused_jobs_fields_as_its_error_envelopes_do(
    client, booking_capabilities
):
    """IntentWeb's error envelope names the fields at fault (``fields``); a job refused for its input ends the
    interaction with one that names them too, both in answer to the next message and in the callback."""
    from agent_handshake.registry import capability_registry
    from tests.intentweb.test_intentweb import Agent, key

    for capability in list(capability_registry):  # only the async booking is left for the intent to reach
        if capability.name != "book_later":
            capability_registry.unregister(capability.name)
    hook = Receiver().start()
    try:
        agent = Agent(client, secret=key())
        _, reply = agent.send("intent_request", "Book a slot", collected_information={"time": "08:00"},
                              callback_url=hook.url())  # fmt: skip
        assert reply["status"] == "accepted", reply
        job_id = reply["external_id"]
        assert tasks.run_job(job_id) == Job.Status.FAILED
        status, reply = agent.send("information_request", "Any news?")
        tasks.deliver_callback(job_id)
    finally:
        hook.stop()
    assert (status, reply["flow_type"], reply["message"]) == (200, "error", MESSAGE)
    assert reply["fields"] == ["collected_information.time"]
    posted = json.loads(hook.requests[0]["body"])
    agent.check(posted)  # a valid envelope, signed by the site
    assert (posted["flow_type"], posted["fields"]) == ("error", ["collected_information.time"])


def test_an_async_jobs_input_refusal_names_its_fields_in_nlwebs_await(client, booking_capabilities):
    """NLWeb's ``/await`` rebuilt a failed job's Failure from its message alone: the fields a synchronous Failure
    names in ``error.details`` were lost."""
    from tests.nlweb.test_nlweb import post

    _, secret = issue()
    query = {"text": "Book a slot", "input": {"time": "08:00"}}
    response, refused = post(client, "/ask", {"query": {**query, "capability": "book_now"}}, **bearer(secret))
    assert response.status_code == 400, refused
    synchronous_fields = refused["error"]["details"]["fields"]
    assert synchronous_fields == ["input.time"]  # as the capability named it

    response, promise = post(client, "/ask", {"query": {**query, "capability": "book_later"}}, **bearer(secret))
    assert response.status_code == 202, promise
    job_id = promise["promise"]["token"]
    assert tasks.run_job(job_id) == Job.Status.FAILED
    response, failure = post(client, "/await", {"promise_token": job_id, "action": "checkin"}, **bearer(secret))
    assert failure["error"]["message"] == MESSAGE, failure
    assert failure["error"]["details"]["fields"] == synchronous_fields
