"""Agent traffic insights: one record per agent request on every front door, written in bulk off the request path.

Real requests through Django's test client (and, for the writer thread, real HTTP servers) on the demo content;
``recording.flush()`` writes what the requests recorded (tests/settings.py starts no writer thread: its commits
would escape the tests' transactions), and the rows are read back from the database.
"""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from django.test import override_settings
from django.utils import timezone

from agent_handshake.insights import recording
from agent_handshake.insights.redaction import redact
from agent_handshake.models import AgentClient, AgentRequest, ApiKey, Document
from tests.ahp.test_converse import llm_settings
from tests.identity.test_verified_agents import Agent as VerifiedAgent
from tests.intentweb.test_intentweb import Agent as IntentAgent
from tests.mcp.test_mcp import call as mcp_call
from tests.nlweb.test_live_servers import SERVERS, serve
from tests.nlweb.test_nlweb import parse_events

pytestmark = pytest.mark.usefixtures("empty_buffer")

ANONYMOUS = "203.0.113.57"


def written() -> list[AgentRequest]:
    recording.flush()
    return list(AgentRequest.objects.order_by("at", "pk"))


def the_row() -> AgentRequest:
    rows = written()
    assert len(rows) == 1, [str(row) for row in rows]
    return rows[0]


def post(client, path: str, body, **extra):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    extra.setdefault("REMOTE_ADDR", ANONYMOUS)
    return client.post(path, data, content_type="application/json", **extra)


def converse(client, query: str, **fields):
    return post(client, "/agent/converse", {"ahp": "0.1", "capability": "content_search", "query": query, **fields})


def pks_of(urls: list[str]) -> list[int]:
    """The documents at ``urls`` (absolute in NLWeb and MCP answers, paths in AHP's)."""
    urls = [url.removeprefix("http://testserver") for url in urls]
    by_url = dict(Document.objects.filter(url__in=urls).values_list("url", "pk"))
    assert len(by_url) == len(urls), urls
    return [by_url[url] for url in urls]


def issue(name: str, scopes=("*",)) -> str:
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=list(scopes))[1]


# --- every front door -------------------------------------------------------------------------------------------


def test_an_ahp_question_is_recorded_with_its_sources_and_who_asked(client, db, demo_content):
    response = converse(client, "How should I brew hojicha?", context={"requesting_agent": "tea-bot/1.0"})
    body = response.json()
    assert response.status_code == 200, body
    row = the_row()
    assert (row.protocol, row.capability, row.outcome, row.status) == ("ahp", "content_search", "success", 200)
    assert row.sources == pks_of([source["url"] for source in body["response"]["sources"]])
    assert row.sources  # the question is on the site's topics
    assert (row.tokens, row.cached, row.weak) == (0, False, False)  # extractive: no model tokens
    assert (row.agent_kind, row.agent) == ("anonymous", "tea-bot/1.0 @ 203.0.113.0/24")
    assert ANONYMOUS not in row.agent  # the network, never the address
    assert row.question == ""  # not without the site's opt-in
    assert 0 <= row.latency_ms < 60_000
    assert abs((timezone.now() - row.at).total_seconds()) < 60


def test_a_repeated_question_is_recorded_as_answered_from_the_cache(client, db, demo_content):
    first = converse(client, "How do I season a Yixing teapot?").json()
    second = converse(client, "How do I season a Yixing teapot?").json()
    assert (first["meta"]["cached"], second["meta"]["cached"]) == (False, True)
    old, new = written()
    assert (old.cached, new.cached) == (False, True)
    assert new.sources == old.sources == pks_of([source["url"] for source in second["response"]["sources"]])
    assert new.agent == "203.0.113.0/24"  # no requesting_agent declared: the network alone


def test_model_tokens_are_recorded(client, db, demo_content, fake_openai):
    fake_openai.reply = lambda request: "Steep gyokuro at 50 to 60 °C [1]."
    with override_settings(AGENT_HANDSHAKE=llm_settings(fake_openai)):
        body = converse(client, "How should I brew gyokuro?").json()
    assert body["meta"]["tokens_used"] == fake_openai.usage_tokens > 0
    assert the_row().tokens == fake_openai.usage_tokens


def test_an_openapi_operation_is_recorded_as_openapi_with_the_keys_client(client, db, demo_content):
    secret = issue("Operations client")
    question = post(client, "/capabilities/content_search", {"query": "How should I brew gyokuro?"})
    inventory = post(
        client, "/capabilities/check_inventory", {"query": "stock", "product": "LK-TEA-0001"},
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )  # fmt: skip
    assert (question.status_code, inventory.status_code) == (200, 200), inventory.json()
    first, second = written()
    assert (first.protocol, first.capability, first.outcome, first.agent_kind) == (
        "openapi", "content_search", "success", "anonymous",
    )  # fmt: skip
    assert first.sources == pks_of([s["url"] for s in question.json()["response"]["sources"]])
    assert (second.protocol, second.capability, second.outcome) == ("openapi", "check_inventory", "success")
    assert (second.agent_kind, second.agent) == ("key", "Operations client")
    assert second.sources == []


def test_nlweb_ask_is_recorded_and_a_stream_when_it_ends(client, db, demo_content):
    answer = post(client, "/ask", {"query": {"text": "How should I brew hojicha?"}})
    assert answer.status_code == 200
    urls = [result["url"] for result in answer.json()["results"]]
    streamed = post(client, "/ask", {"query": {"text": "How should I brew hojicha?"}, "prefer": {"streaming": True}})
    assert streamed.streaming
    # The stream's record is finished when the stream is: its turn has not been answered yet.
    assert recording.pending() == 1
    events = parse_events(b"".join(streamed.streaming_content))
    assert [name for name, _ in events][-2:] == ["complete", "end"]
    plain, stream = written()
    for row in (plain, stream):
        assert (row.protocol, row.capability, row.outcome, row.status) == ("nlweb", "content_search", "success", 200)
        assert row.sources == pks_of(urls)
    assert stream.cached  # the same question, a moment later


def test_a_stream_closed_before_its_first_chunk_is_recorded_and_leaves_no_record_open(client, db, demo_content):
    streamed = post(client, "/ask", {"query": {"text": "How should I brew hojicha?"}, "prefer": {"streaming": True}})
    assert streamed.streaming
    assert recording.current() is None  # the stream carries the record; this thread's context is clean
    # The client went away: the server closes the response without reading it (request_finished would also
    # close the test's database connection, as after a real request: not here).
    request_finished.disconnect(close_old_connections)
    try:
        streamed.close()
    finally:
        request_finished.connect(close_old_connections)
    row = the_row()
    assert (row.protocol, row.status) == ("nlweb", 200)


def test_a_made_up_capability_in_the_path_is_not_recorded_as_one(client, db, demo_content):
    response = post(client, "/capabilities/no_such_capability_4711", {"query": "anything"})
    assert 400 <= response.status_code < 500
    row = the_row()
    assert (row.protocol, row.capability, row.outcome) == ("openapi", "", "error")


def test_a_declared_agent_name_is_redacted_like_a_question(client, db, demo_content):
    converse(client, "How should I brew hojicha?", context={"requesting_agent": "jane.doe@example.com"})
    assert the_row().agent == "[email] @ 203.0.113.0/24"


def test_an_mcp_tool_call_is_recorded(client, db, demo_content):
    response, body = mcp_call(client, "content_search", {"query": "How should I brew hojicha?"}, version="2025-06-18")
    assert response.status_code == 200
    assert body["result"]["isError"] is False
    row = the_row()
    assert (row.protocol, row.capability, row.outcome, row.status) == ("mcp", "content_search", "success", 200)
    assert row.sources == pks_of([s["url"] for s in body["result"]["structuredContent"]["sources"]])


def test_an_intentweb_intent_is_recorded(client, db, demo_content):
    status, reply = IntentAgent(client).send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["flow_type"]) == (200, "execution_result")
    row = the_row()
    assert (row.protocol, row.capability, row.outcome, row.status) == ("intentweb", "check_inventory", "success", 200)


def test_schema_templates_are_recorded_as_read_and_as_submitted(client, db, demo_content):
    assert client.get("/schema-templates/check_inventory").status_code == 200
    submitted = post(
        client, "/schema-templates", {"schema_id": "check_inventory_v1", "payload": {"product": "LK-TEA-0001"}}
    )
    assert submitted.status_code == 200, submitted.json()
    read, submission = written()
    assert (read.protocol, read.capability, read.outcome, read.status) == (
        "schema_templates", "check_inventory", "success", 200,
    )  # fmt: skip
    assert (submission.protocol, submission.capability, submission.outcome) == (
        "schema_templates", "check_inventory", "success",
    )  # fmt: skip


def test_a_verified_agent_is_recorded_by_its_did(client, db, demo_content):
    agent = VerifiedAgent(client)
    agent.handshake()
    response = post(client, "/agent/converse", {"capability": "content_search", "query": "gyokuro", "context":
                                                {"requesting_agent": "whatever it says"}}, **agent.headers)  # fmt: skip
    assert response.status_code == 200
    rows = written()
    assert [(row.protocol, row.capability) for row in rows] == [("ahp", ""), ("ahp", ""), ("ahp", "content_search")]
    assert [row.agent_kind for row in rows] == ["anonymous", "anonymous", "did"]  # the handshake is not yet verified
    assert rows[-1].agent == agent.did


# --- outcomes ---------------------------------------------------------------------------------------------------


def test_a_rate_limited_request_is_recorded_with_the_capability_its_path_names(client, db, demo_content):
    limits = {"RATE_LIMITS": {"unauthenticated": {"requests": "2/minute"}}}
    with override_settings(AGENT_HANDSHAKE=limits):
        statuses = [post(client, "/capabilities/content_search", {"query": "tea"}).status_code for _ in range(3)]
        refused = converse(client, "tea")
    assert statuses == [200, 200, 429]
    assert refused.status_code == 429
    rows = written()
    assert [(row.outcome, row.status) for row in rows] == [("success", 200)] * 2 + [("rate_limited", 429)] * 2
    assert [row.capability for row in rows[2:]] == ["content_search", ""]  # AHP's body was never read for it


def test_a_bad_body_and_a_bad_content_length_are_errors(client, db, demo_content):
    assert post(client, "/agent/converse", b"{not json").status_code == 400
    assert post(client, "/ask", {"query": {"text": "tea"}}, CONTENT_LENGTH="abc").status_code == 400
    rows = written()
    assert [(row.protocol, row.outcome, row.status) for row in rows] == [("ahp", "error", 400), ("nlweb", "error", 400)]


def test_refusals_are_recorded_as_refused(client, db, demo_content):
    # A capability that needs credentials, asked without: refused at the door (401).
    order = post(client, "/capabilities/order_status", {"query": "status", "order_number": "LK-1",
                                                         "email": "a@example.com"})  # fmt: skip
    assert order.status_code == 401
    # A capability refusing its input (a number where the product goes): the concierge's refusal, a 400.
    inventory = post(client, "/capabilities/check_inventory", {"query": "stock", "product": 5})
    assert inventory.status_code == 400, inventory.json()
    first, second = written()
    assert (first.capability, first.outcome, first.status) == ("order_status", "refused", 401)
    assert (second.capability, second.outcome, second.status) == ("check_inventory", "refused", 400)


def test_no_answer_clarification_and_weak_matches(client, db, demo_content):
    nothing = converse(client, "What is the capital of France?").json()
    assert nothing["response"]["sources"] == []
    assert converse(client, "matcha").json()["status"] == "clarification_needed"
    # The one off-topic question of the demo's measurement over the relevance floor (0.42): with the reader's
    # decision out of the way, answered, weakly; with it, nothing (naming the closest page).
    with override_settings(AGENT_HANDSHAKE={"READER_MIN_SCORE": -100.0}):
        weak = converse(client, "What is the weather in Tokyo tomorrow?").json()
    assert weak["response"]["sources"]
    read = converse(client, "What is the weather in Tokyo tomorrow?").json()
    assert [source["relevance"] for source in read["response"]["sources"]] == ["background"]
    no_answer, clarification, answered, unanswered = written()
    assert (no_answer.outcome, no_answer.sources, no_answer.weak) == ("no_answer", [], False)
    assert (clarification.outcome, clarification.capability, clarification.sources) == (
        "clarification", "content_search", [],
    )  # fmt: skip
    assert (answered.outcome, answered.weak) == ("success", True)
    assert (unanswered.outcome, len(unanswered.sources)) == ("no_answer", 1)


def test_a_mode3_clarification_is_recorded(client, db, demo_content):
    secret = issue("Booker")
    response = post(client, "/agent/converse", {"capability": "book_appointment", "query": "Book a tea tasting"},
                    HTTP_AUTHORIZATION=f"Bearer {secret}")  # fmt: skip
    assert response.json()["status"] == "clarification_needed", response.json()
    row = the_row()
    assert (row.capability, row.outcome, row.agent_kind, row.agent) == (
        "book_appointment", "clarification", "key", "Booker",
    )  # fmt: skip


def test_an_ahp_refusal_before_any_call_names_the_capability_asked_for(client, db, demo_content):
    response = post(client, "/agent/converse", {"ahp": "0.1", "capability": "order_status", "query": "Where is LK-1?"})
    assert response.status_code == 401, response.json()
    row = the_row()
    assert (row.protocol, row.capability, row.outcome, row.status) == ("ahp", "order_status", "refused", 401)


def test_a_routing_clarification_is_recorded_as_a_clarification(client, db, demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every candidate ties
    body = post(client, "/agent/converse", {"ahp": "0.1", "query": "Is LK-TEA-0001 in stock?"}).json()
    assert body["status"] == "clarification_needed", body
    row = the_row()
    assert (row.protocol, row.outcome, row.status) == ("ahp", "clarification", 200)


def test_an_intent_asking_for_more_information_is_a_clarification_for_its_capability(client, db, demo_content):
    agent = IntentAgent(client, secret=issue("Booker"))
    status, reply = agent.send("intent_request", "I would like to book a tea tasting")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    row = the_row()
    assert (row.protocol, row.capability, row.outcome) == ("intentweb", "book_appointment", "clarification")


# --- the site's choices -------------------------------------------------------------------------------------------


def test_questions_are_stored_only_with_the_opt_in_and_redacted(client, db, demo_content, settings):
    question = "I'm ada@example.com, +44 20 7946 0958, card 4111 1111 1111 1111: how do I brew 250 ml of sencha?"
    converse(client, question)
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INSIGHTS_RECORD_QUESTIONS": True}
    converse(client, question)
    hidden, stored = written()
    assert hidden.question == ""
    assert stored.question == "I'm [email], [phone], card [number]: how do I brew 250 ml of sencha?"


def test_nothing_is_recorded_when_insights_are_off(client, db, demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INSIGHTS_ENABLED": False}
    assert converse(client, "How should I brew hojicha?").status_code == 200
    assert post(client, "/ask", {"query": {"text": "hojicha"}}).status_code == 200
    assert recording.pending() == 0
    assert written() == []


def test_a_full_buffer_drops_and_counts_and_never_fails_a_request(client, db, demo_content, settings, caplog):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INSIGHTS_BUFFER_MAX": 2}
    with caplog.at_level(logging.WARNING, logger="agent_handshake.insights.recording"):
        statuses = [post(client, "/ask", {"query": {"text": "hojicha"}}).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert (recording.pending(), recording.dropped()) == (2, 1)
    assert "1 record(s) dropped" in caplog.text
    assert len(written()) == 2


def test_a_record_the_database_refuses_is_dropped_and_the_others_are_written(client, db, demo_content, caplog):
    # Request bodies cannot carry a NUL (the front doors refuse them, and an anonymous sender's name is stored without
    # control characters); a record holding one stands for any data the database refuses.
    record = recording.begin("ahp", "content_search")
    record.settle(200, agent_kind="key", agent="nul\x00agent")
    recording.finish(record)
    assert converse(client, "How should I brew hojicha?").status_code == 200
    with caplog.at_level(logging.WARNING, logger="agent_handshake.insights.recording"):
        assert recording.flush() == 1
    assert "could not be stored" in caplog.text
    assert recording.dropped() == 1
    assert [row.agent for row in AgentRequest.objects.all()] == ["203.0.113.0/24"]


def test_notes_outside_a_request_do_nothing(db):
    recording.note(capability="content_search", outcome="success", tokens=5)  # a Celery task, the shell
    assert recording.current() is None
    assert recording.pending() == 0


def test_the_network_prefix_of_ipv4_and_ipv6_senders():
    assert recording.network_prefix("198.51.100.23") == "198.51.100.0/24"
    assert recording.network_prefix("2001:db8:1234:5678::1") == "2001:db8:1234::/48"
    assert recording.network_prefix(None) == recording.network_prefix("not an address") == "unknown"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Write to jane.doe+tea@example.co.uk today", "Write to [email] today"),
        ("call +33 6 12 34 56 78 please", "call [phone] please"),
        ("+1 (555) 123-4567", "[phone]"),
        ("(555) 123-4567 or 555.123.4567", "[phone] or [phone]"),
        ("London: 020 7946 0958", "London: [phone]"),
        ("mobile 06 12 34 56 78", "mobile [phone]"),
        ("+441234567890", "[phone]"),
        ("0033 6 12 34 56 78", "[phone]"),
        ("ring 555-1234 now", "ring [phone] now"),
        ("card 4111 1111 1111 1111", "card [number]"),
        ("card 4111-1111-1111-1111", "card [number]"),
        ("account 0612345678", "account [number]"),
        ("order 123456 shipped", "order [number] shipped"),
        ("IBAN FR7630006000011234567890189", "IBAN FR[number]"),
        ("ref ab123456cd", "ref ab[number]cd"),
        # Taken out after normalising: odd spaces, Unicode dashes, spaced or unusual separators, brackets.
        ("card 4111  1111  1111  1111", "card [number]"),
        ("card 4111\xa01111\xa01111\xa01111", "card [number]"),
        ("card 4111,1111,1111,1111", "card [number]"),
        ("card 4111, 1111, 1111, 1111 thanks", "card [number] thanks"),
        ("teas of 1990, 2000, 2010, 2020", "teas of 1990, 2000, 2010, 2020"),
        ("card 4111_1111_1111_1111", "card [number]"),
        ("card 4111\u200b1111\u200b1111\u200b1111", "card [number]"),
        ("ring 555\u2011123\u20114567", "ring [phone]"),
        ("ring 555\u2013123\u20134567", "ring [phone]"),
        ("ring 555 - 123 - 4567", "ring [phone]"),
        ("ring (555)123-4567", "ring [phone]"),
        ("code 12-34-5678", "code [phone]"),
        # Kept: years, dates, quantities, times, prices, versions, SKUs and short numbers.
        ("teas from 2024 and 1990-2020", "teas from 2024 and 1990-2020"),
        ("delivered 2024-05-01 or 01/05/2024?", "delivered 2024-05-01 or 01/05/2024?"),
        ("brew 250 ml at 80°C for 2-3 min, 12:30", "brew 250 ml at 80°C for 2-3 min, 12:30"),
        ("costs 1,299.00 or €12.50", "costs 1,299.00 or €12.50"),
        ("version 3.2.1 of LK-TEA-0001, order #12345", "version 3.2.1 of LK-TEA-0001, order #12345"),
        ("3 x 20 g, 10-15 minutes", "3 x 20 g, 10-15 minutes"),
        ("due 2026-11-23 or 31/12/2026, 1990\u20132020", "due 2026-11-23 or 31/12/2026, 1990-2020"),
        ("costs 1,299,000.00; sizes 100, 200, 300, 400", "costs 1,299,000.00; sizes 100, 200, 300, 400"),
        # Written forms that mean something else once folded (NFKC made "10⁶" "106") are kept as written.
        ("grow 10⁶ cells in H₂O at x² + 1", "grow 10⁶ cells in H₂O at x² + 1"),
        ("½ cup at 80℃, ① then ②, ℕ and ﬁne", "½ cup at 80℃, ① then ②, ℕ and ﬁne"),
        # Full-width and half-width forms are the same characters, folded so that what they write is seen.
        ("write ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "write [email]"),
        ("card ４１１１．１１１１．１１１１．１１１１", "card [number]"),
        ("call ０９０－１２３４－５６７８　now", "call [phone] now"),
        ("ＡＢＣ tea ﾃｨｰ ｶﾞ", "ABC tea ティー ガ"),
        # The joiners a word or an emoji needs stay; decomposed accents are composed (NFC).
        ("می\u200cخواهم \U0001f469\u200d\U0001f4bb", "می\u200cخواهم \U0001f469\u200d\U0001f4bb"),
        ("cafe\u0301 Tea\u200dFinder", "caf\u00e9 TeaFinder"),
        ("", ""),
    ],
)
def test_redaction(text, expected):
    assert redact(text) == expected


def test_redaction_takes_linear_time_on_hostile_text():
    for hostile in ("a" * 200_000, "a@" * 100_000, "1 " * 100_000, "(1" * 100_000, "x.y@z" * 40_000):
        started = time.perf_counter()
        redact(hostile)
        assert time.perf_counter() - started < 5, hostile[:10]


# --- the writer thread, in a real server ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_a_server_writes_its_records_without_being_asked(demo_content, django_db_blocker, kind):
    """Under gunicorn (a forked worker) and uvicorn (ASGI, a streamed answer advanced in a thread), the writer thread
    stores the records within seconds; nobody calls flush()."""
    name = f"insights-live-{kind.split()[0]}"
    since = timezone.now()
    try:
        with serve(kind, "", AGENT_HANDSHAKE_INSIGHTS_FLUSH_SECONDS="0.5") as url, httpx.Client(timeout=60) as http:
            body = {"capability": "content_search", "query": "How should I brew hojicha?",
                    "context": {"requesting_agent": name}}  # fmt: skip
            answered = http.post(f"{url}/agent/converse", json=body)
            assert answered.status_code == 200, answered.text
            streamed = http.post(f"{url}/ask", json={"query": {"text": "How should I brew hojicha?"}},
                                 headers={"Accept": "text/event-stream"})  # fmt: skip
            assert "event: complete" in streamed.text
            deadline = time.monotonic() + 10
            with django_db_blocker.unblock():
                while time.monotonic() < deadline:
                    rows = list(AgentRequest.objects.filter(at__gte=since).order_by("at"))
                    if len(rows) >= 2:
                        break
                    time.sleep(0.2)
        assert [(row.protocol, row.capability, row.outcome) for row in rows] == [
            ("ahp", "content_search", "success"), ("nlweb", "content_search", "success"),
        ], [str(row) for row in rows]  # fmt: skip
        assert rows[0].agent == f"{name} @ 127.0.0.0/24"
        assert rows[1].sources
        assert rows[1].latency_ms >= 0
    finally:
        with django_db_blocker.unblock():
            AgentRequest.objects.filter(at__gte=since).delete()
