"""IntentWeb's flows and its page for people: the retry of the message that ended an interaction (a poll or a final
turn) gets its result again, said to be replayed; the page's visitors do not share one limit, and are offered only what
its key may do; an external_id longer than its column is no server error."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.jobs import complete_waiting
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.models import Job
from demo_site.shop.models import Appointment
from tests.intentweb.test_intentweb import Agent, key
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


def page_visitor(address: str) -> tuple[Client, dict]:
    """A browser at ``address`` that has opened the intent page: its client and the headers its script sends."""
    browser = Client(enforce_csrf_checks=True, REMOTE_ADDR=address)
    assert browser.get("/intent-ui/").status_code == 200
    return browser, {"HTTP_X_CSRFTOKEN": browser.cookies["csrftoken"].value}


def page_says(browser: Client, headers: dict, body: dict) -> tuple[int, dict]:
    response = browser.post("/intent-ui/message", json.dumps(body), content_type="application/json", **headers)
    return response.status_code, response.json()


def test_one_page_visitor_cannot_use_up_every_visitors_booking_limit(demo_content, settings):
    """Every visitor of the page acts with the page's one key, so a capability's own limit (ACTION_RATE_LIMIT) was
    counted for that key: one visitor who sent a few bookings left every other visitor 429 for the rest of the
    window. The page's limits count per client address (README), the capability's too."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ACTION_RATE_LIMIT": "2/minute"}
    booking = tasting_booking()
    fields = {name: booking[name] for name in ("service", "date", "time", "name", "email")}
    busy, busy_headers = page_visitor("203.0.113.7")
    for time in ("11:00", "14:00", "15:00"):
        status, reply = page_says(busy, busy_headers, {"message": "Book a tea-tasting",
                                                       "collected_information": {**fields, "time": time}})  # fmt: skip
    assert status == 429, reply  # the busy visitor's own budget is spent
    assert reply["status"] == "rate_limited"
    other, other_headers = page_visitor("198.51.100.20")
    status, reply = page_says(other, other_headers, {"message": "Book a tea-tasting",
                                                     "collected_information": {**fields, "time": "16:00"}})  # fmt: skip
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert Appointment.objects.count() == 3


def test_the_retry_of_the_poll_that_ended_an_async_interaction_gets_its_result_again(client, demo_content):
    """An ``async`` capability's result comes in answer to a poll. A client that lost that answer and sent the poll
    again, with the same Idempotency-Key, got 409 interaction_closed: the retry of the last message gets the same
    result again (README), for a poll as for a final turn."""
    agent = Agent(client, secret=key())
    _, reply = agent.send("intent_request", "I'd like to speak to a person about a custom blend")
    assert reply["status"] == "accepted", reply
    job = Job.objects.get(pk=reply["external_id"])
    run_job(job.pk)
    complete_waiting(job.pk, operator_outcome("We can blend it for you: 250 g minimum.", "Mira"))
    poll = {"HTTP_IDEMPOTENCY_KEY": "poll-7"}
    status, reply = agent.send("information_response", "Any news?", headers=poll)
    assert (status, reply["flow_type"], reply["status"]) == (200, "execution_result", "completed"), reply
    status, again = agent.send("information_response", "Any news?", headers=poll)  # the answer was lost
    assert status == 200, again
    assert (again["flow_type"], again["status"]) == ("execution_result", "completed")
    assert again["message"] == reply["message"]
    assert again["external_id"] == reply["external_id"]
    # Another message after the end is still refused; so is the key for another request.
    status, other = agent.send("information_response", "Thanks!")
    assert (status, other["status"]) == (409, "interaction_closed")
    status, other = agent.send("information_response", "Thanks!", headers=poll)
    assert (status, other["flow_type"]) == (422, "error"), other  # as Call.stored answers a reused key


def test_the_page_lists_only_what_its_key_may_do(demo_content, settings):
    """The page said "Here is what you can do on this site" over every capability, those its key (INTENT_UI_SCOPES,
    empty by default) may not use included: a person who chose one got a refusal about API keys. It lists what
    needs no key and what the page's scopes allow."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INTENT_UI_SCOPES": []}
    page = Client().get("/intent-ui/")
    listed = {capability["name"] for capability in page.context["capabilities"]}
    assert {"check_inventory", "custom_quote"} <= listed
    assert not listed & {"book_appointment", "order_status", "escalate_to_human"}
    assert b"Book a tasting or a teaware consultation" not in page.content
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INTENT_UI_SCOPES": ["book_appointment"]}
    page = Client().get("/intent-ui/")
    listed = {capability["name"] for capability in page.context["capabilities"]}
    assert "book_appointment" in listed
    assert "order_status" not in listed


def test_the_retry_of_a_final_turn_says_it_was_replayed(client, demo_content):
    """A retry of the message that ended an interaction (same Idempotency-Key) gets the stored result, but without
    the ``Idempotent-Replayed: true`` every other front door sends with one: the client could not tell a replay
    from a second run."""
    agent = Agent(client, secret=key())
    headers = {"HTTP_IDEMPOTENCY_KEY": "stock-1", "HTTP_AUTHORIZATION": f"Bearer {agent.secret}"}
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    first = client.post("/intent", json.dumps(body), content_type="application/json", **headers)
    assert first.status_code == 200, first.content
    assert first.json()["flow_type"] == "execution_result"
    assert "Idempotent-Replayed" not in first.headers
    retry = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")  # a new nonce and time
    again = client.post("/intent", json.dumps(retry), content_type="application/json", **headers)
    assert again.status_code == 200, again.content
    agent.check(again.json())
    assert again.json()["result"] == first.json()["result"]
    assert again.headers.get("Idempotent-Replayed") == "true"


def test_a_long_external_id_is_no_server_error(client, demo_content, registries):
    """A capability whose output's ``reference`` is longer than the interaction's external_id column (a signed
    token, say) ran, then the interaction's save failed: a 500, and the work undone. The reply carries the whole
    reference; the stored interaction keeps what its column holds."""
    from agent_handshake import Capability, Outcome

    capabilities = registries[1]
    for capability in list(capabilities):
        if capability.action_type:
            del capabilities._capabilities[capability.name]
    reference = "R" * 300

    capabilities.register(Capability(
        name="title_lookup", description="Find a page by its title.", mode="MODE3", action_type="query",
        response_types=["application/data"], intent="Look up a page by its title",
        handler=lambda invocation: Outcome({"reference": reference}, answer="Found it."),
        input_schema={"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"reference": {"type": "string"}}},
    ))  # fmt: skip
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Look up a page by its title")
    assert reply["flow_type"] == "information_request", reply
    status, reply = agent.send("information_response", "Why gyokuro is shaded")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert reply["external_id"] == reference
    assert reply["result"] == {"reference": reference}
