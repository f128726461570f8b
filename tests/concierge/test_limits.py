"""Limits nobody can spoof (issue 9): who a request is counted as, whose sessions it may continue, the token
budgets of both tiers, the client address behind reverse proxies, and the session lock during slow answers."""

from __future__ import annotations

import contextlib
import datetime
import json
import threading
import urllib.error
import urllib.request
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import DatabaseError, connection, transaction
from django.test import override_settings
from django.utils import timezone

from agent_handshake import checks
from agent_handshake.models import AgentClient, ApiKey, ConverseSession
from demo_site.shop.models import Order
from tests.ahp.test_converse import llm_settings
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db
URL = "/agent/converse"
# Counted like any request, then refused (400) before retrieval: what the request-count tests need.
UNKNOWN = {"ahp": "0.1", "capability": "no_such_capability", "query": "hello"}


def post(client, body, ip="192.0.2.1", **headers):
    return client.post(URL, json.dumps(body), content_type="application/json", headers=headers, REMOTE_ADDR=ip)


def issue(name="Test agent"):
    agent, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


def real_ip(request):
    """A CLIENT_IP_FUNCTION: the address a proxy put in X-Real-IP."""
    return request.META.get("HTTP_X_REAL_IP")


def configure(settings, **values):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, **values}


# --- requesting_agent: a hint, never an identity ------------------------------------------------------------------


def test_a_requesting_agent_name_never_throttles_a_key_nor_another_sender(client, settings):
    configure(settings, AGENT_RATE_LIMIT="3/minute")
    named = {**UNKNOWN, "context": {"requesting_agent": "shared-bot"}}
    # Three senders use the name up to its limit...
    assert [post(client, named, ip=f"198.51.100.{n}").status_code for n in range(3)] == [400] * 3
    # ... a fourth sender naming it still has its own quota ...
    assert post(client, named, ip="198.51.100.99").status_code == 400
    # ... and a valid API key sending the name is counted by its key alone.
    keyed = post(client, named, ip="198.51.100.0", **bearer(issue()))
    assert keyed.status_code == 400
    assert keyed["X-RateLimit-Limit"] == "120"
    # One sender is still held to the name's limit (§11.3's "agent" scope).
    assert [post(client, named, ip="198.51.100.0").status_code for _ in range(3)] == [400, 400, 429]
    limited = post(client, named, ip="198.51.100.0")
    assert (limited.status_code, limited.json()["scope"]) == (429, "agent")
    assert post(client, {**UNKNOWN, "context": {"requesting_agent": "other-bot"}}, ip="198.51.100.0").status_code == 400


# --- the client's address -----------------------------------------------------------------------------------------


def test_behind_a_trusted_proxy_each_client_has_its_own_limit(client, settings):
    configure(settings, RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}}, TRUSTED_PROXY_COUNT=1)

    def via_proxy(forwarded_for):
        return post(client, UNKNOWN, ip="10.0.0.2", **{"X-Forwarded-For": forwarded_for}).status_code

    assert [via_proxy("203.0.113.1") for _ in range(3)] == [400, 400, 429]
    assert via_proxy("203.0.113.2") == 400  # another client behind the same proxy: its own bucket
    # What the client itself sends in the header (left of what the proxy appended) changes nothing.
    assert via_proxy("198.51.100.7, 203.0.113.1") == 429
    assert via_proxy("::ffff:203.0.113.1") == 429  # the same client, IPv4-mapped
    # A request that did not come through the proxy (no header) is counted by its own address.
    assert post(client, UNKNOWN, ip="10.0.0.2").status_code == 400

    # Two proxies (a load balancer, then nginx): the client is the second entry from the right.
    configure(settings, TRUSTED_PROXY_COUNT=2)
    assert [via_proxy(f"203.0.113.50, 10.0.0.{n}") for n in (7, 8, 9)] == [400, 400, 429]

    # Without trusted proxies the header is never read: it cannot buy a sender a new bucket.
    configure(settings, TRUSTED_PROXY_COUNT=0)
    spoofed = [post(client, UNKNOWN, ip="192.0.2.9", **{"X-Forwarded-For": f"198.51.100.{n}"}) for n in range(3)]
    assert [response.status_code for response in spoofed] == [400, 400, 429]


def test_ipv6_clients_are_counted_per_64(client, settings):
    configure(settings, RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    same_64 = ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::abcd"]
    assert [post(client, UNKNOWN, ip=ip).status_code for ip in same_64] == [400, 400, 429]
    assert post(client, UNKNOWN, ip="2001:db8:1:3::1").status_code == 400


def test_client_ip_function_replaces_remote_addr_and_is_re_read_on_setting_change(client, settings):
    configure(settings, RATE_LIMITS={"unauthenticated": {"requests": "1/minute"}})
    assert post(client, UNKNOWN, ip="10.0.0.3").status_code == 400
    assert post(client, UNKNOWN, ip="10.0.0.3", **{"X-Real-IP": "203.0.113.9"}).status_code == 429
    configure(settings, CLIENT_IP_FUNCTION="tests.concierge.test_limits.real_ip")
    assert post(client, UNKNOWN, ip="10.0.0.3", **{"X-Real-IP": "203.0.113.9"}).status_code == 400
    assert post(client, UNKNOWN, ip="10.0.0.3", **{"X-Real-IP": "203.0.113.10"}).status_code == 400
    assert post(client, UNKNOWN, ip="10.0.0.4", **{"X-Real-IP": "203.0.113.9"}).status_code == 429


@pytest.mark.parametrize(
    "setting",
    [
        {"TRUSTED_PROXY_COUNT": -1},
        {"TRUSTED_PROXY_COUNT": "1"},
        {"CLIENT_IP_FUNCTION": "tests.concierge.test_limits.no_such_function"},
        {"CLIENT_IP_FUNCTION": "tests.concierge.test_limits.URL"},
        {"AGENT_RATE_LIMIT": "30 per minute"},
        {"AGENT_RATE_LIMIT": "30/week"},
        {"ACTION_RATE_LIMIT": "30/5m"},
        {"ACTION_RATE_LIMIT": 30},
        {"RATE_LIMITS": {"authenticated": {"requests": "120/minutes"}}},
    ],
)
def test_e002_client_address_and_rate_settings(setting):
    with override_settings(AGENT_HANDSHAKE=setting):
        messages = checks.check_settings()
    assert [message.id for message in messages] == ["agent_handshake.E002"], [m.msg for m in messages]
    assert messages[0].msg.startswith(f"AGENT_HANDSHAKE['{next(iter(setting))}']")


def test_manage_py_check_refuses_a_malformed_agent_rate_limit_that_requests_would_trip_on(client):
    with override_settings(AGENT_HANDSHAKE={"AGENT_RATE_LIMIT": "30 a minute"}), pytest.raises(SystemCheckError):
        call_command("check", stdout=StringIO(), stderr=StringIO())
    with override_settings(AGENT_HANDSHAKE={"AGENT_RATE_LIMIT": "", "ACTION_RATE_LIMIT": ""}):  # "": no limit
        call_command("check", stdout=StringIO())
        named = post(client, {**UNKNOWN, "context": {"requesting_agent": "bot"}})
    assert named.status_code == 400


# --- sessions belong to whoever started them ----------------------------------------------------------------------


def test_a_mode3_clarification_is_completed_only_by_the_key_that_started_it(client):
    call_command("loaddata", "demo", app_label="shop", verbosity=0)
    order = Order.objects.first()
    owner, stranger = issue("Owner"), issue("Stranger")
    structured = ["application/action-result", "application/data", "text/answer"]

    def order_status(secret, **fields):
        body = {"capability": "order_status", "query": f"Where is order {order.number}?", **fields}
        body["context"] = {"accept_types": structured}
        return post(client, body, **bearer(secret))

    asked = order_status(owner).json()
    assert asked["status"] == "clarification_needed", asked
    answer = {"session_id": asked["session_id"], "clarification": f"It was placed with {order.customer_email}"}
    taken = order_status(stranger, **answer)
    assert taken.status_code == 404
    assert taken.json()["reason"] == "unknown_session"
    assert order.customer_email not in taken.content.decode()
    assert ConverseSession.objects.get(pk=asked["session_id"]).pending_clarification is not None
    unknown = order_status(stranger, session_id="no-such-session", clarification="x")
    assert taken.json()["message"].replace(asked["session_id"], "no-such-session") == unknown.json()["message"]
    completed = order_status(owner, **answer)
    assert completed.status_code == 200, completed.json()
    assert completed.json()["response"]["payload"]["data"]["status"] == order.status


def test_a_mode2_session_is_continued_only_by_its_owner(client, demo_content):
    def ask(query, ip="203.0.113.20", **fields):
        headers = fields.pop("headers", {})
        return post(client, {"ahp": "0.1", "capability": "content_search", "query": query, **fields}, ip, **headers)

    started = ask("How should I brew gyokuro?").json()
    session_id = started["session_id"]
    for stranger in (
        ask("and the second one?", ip="203.0.113.21", session_id=session_id),  # another address
        ask("and the second one?", session_id=session_id, headers=bearer(issue())),  # a key, same address
    ):
        assert stranger.status_code == 404, stranger.json()
        assert stranger.json()["reason"] == "unknown_session"
    assert ask("and the second one?", session_id=session_id).json()["status"] == "success"

    key = issue("Keyed")
    keyed = ask("How is gyokuro grown?", headers=bearer(key)).json()
    assert ConverseSession.objects.get(pk=keyed["session_id"]).api_key == ApiKey.objects.get(client__name="Keyed")
    assert ask("and the first one?", session_id=keyed["session_id"]).status_code == 404  # anonymous, same address
    assert ask("and the first one?", session_id=keyed["session_id"], headers=bearer(key)).status_code == 200

    # An expired session is "unknown" to a stranger too (410 would tell that it existed), and stays for its owner.
    ConverseSession.objects.filter(pk=session_id).update(last_active_at=timezone.now() - datetime.timedelta(hours=1))
    assert ask("still there?", ip="203.0.113.21", session_id=session_id).status_code == 404
    assert ask("still there?", session_id=session_id).status_code == 410


# --- token budgets ------------------------------------------------------------------------------------------------


def test_the_authenticated_token_budget_in_the_manifest_is_enforced(client, settings, demo_content, fake_openai):
    limits = {
        "unauthenticated": {"requests": "100/minute", "token_budget": "1000/session"},
        "authenticated": {"requests": "100/minute", "token_budget": "50/session"},
    }
    configure(settings, **llm_settings(fake_openai, RATE_LIMITS=limits))
    assert client.get("/.well-known/agent.json").json()["rate_limits"]["authenticated"]["token_budget"] == "50/session"

    def ask(query, session_id=None, **headers):
        body = {"ahp": "0.1", "capability": "content_search", "query": query, "session_id": session_id}
        return post(client, body, **headers)

    secret = issue()
    first = ask("How is gyokuro grown?", **bearer(secret)).json()
    assert first["meta"]["tokens_used"] == fake_openai.usage_tokens == 42
    assert ask("How do I brew sencha?", first["session_id"], **bearer(secret)).json()["status"] == "success"
    refused = ask("What is hojicha?", first["session_id"], **bearer(secret))  # 84 >= 50
    assert refused.status_code == 429
    assert (refused.json()["scope"], refused.json()["retry_after"]) == ("session_tokens", None)
    # Anonymous sessions have the unauthenticated budget.
    anonymous = ask("How is gyokuro grown?").json()
    for query in ("How do I brew sencha?", "What is hojicha?"):
        assert ask(query, anonymous["session_id"]).json()["status"] == "success"


def test_a_verified_agent_on_the_anonymous_tier_has_the_anonymous_token_budget(
    client, settings, demo_content, fake_openai
):
    """A DID trust tier's rate limits are a RATE_LIMITS tier, token budget included: an agent on the
    unauthenticated tier (probation) does not get the authenticated budget because its credential is a key."""
    from tests.identity.test_verified_agents import Agent

    limits = {
        "unauthenticated": {"requests": "100/minute", "token_budget": "50/session"},
        "authenticated": {"requests": "100/minute", "token_budget": "1000/session"},
    }
    tiers = [{"name": "probation", "min_trust": 0.0, "rate_limits": "unauthenticated", "scopes": []}]
    configure(settings, **llm_settings(fake_openai, RATE_LIMITS=limits, DID_TRUST_TIERS=tiers))
    agent = Agent(client)
    assert agent.handshake()["tier"] == "probation"

    def ask(query, session_id=None):
        body = {"ahp": "0.1", "capability": "content_search", "query": query, "session_id": session_id}
        return client.post(URL, json.dumps(body), content_type="application/json", **agent.headers)

    first = ask("How is gyokuro grown?").json()
    assert first["meta"]["tokens_used"] == fake_openai.usage_tokens == 42
    assert ask("How do I brew sencha?", first["session_id"]).json()["status"] == "success"
    refused = ask("What is hojicha?", first["session_id"])  # 84 >= 50, the unauthenticated budget
    assert refused.status_code == 429, refused.json()
    assert (refused.json()["scope"], refused.json()["retry_after"]) == ("session_tokens", None)

    # The same budget through the other doors: NLWeb's conversation and an MCP tool's session_id.
    def nlweb(query, conversation_id=None):
        meta = {"session_context": {"conversation_id": conversation_id}} if conversation_id else {}
        body = {"query": {"text": query}, "meta": meta, "prefer": {"streaming": False, "mode": "summarize"}}
        return client.post("/ask", json.dumps(body), content_type="application/json", **agent.headers)

    # (Other questions: the answer cache has the three above, and a cached answer costs no tokens.)
    started = nlweb("How is matcha made?").json()
    conversation = started["_meta"]["session_context"]["conversation_id"]
    assert nlweb("How do I store oolong?", conversation).status_code == 200
    assert nlweb("What is a gaiwan?", conversation).status_code == 429

    def mcp(query, session_id=None):
        arguments = {"query": query} | ({"session_id": session_id} if session_id else {})
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "content_search", "arguments": arguments}}  # fmt: skip
        headers = {
            **agent.headers,
            "HTTP_ACCEPT": "application/json, text/event-stream",
            "HTTP_MCP_PROTOCOL_VERSION": "2025-06-18",
        }
        return client.post("/mcp", json.dumps(body), content_type="application/json", **headers).json()

    called = mcp("What is pu-erh?")
    session_id = called["result"]["structuredContent"]["session_id"]
    assert not mcp("How do I make cold brew tea?", session_id)["result"].get("isError")
    assert mcp("What is rooibos?", session_id)["result"]["isError"]


def test_daily_token_budget_and_sessions_use_the_client_address_behind_a_proxy(
    client, settings, demo_content, fake_openai
):
    configure(settings, **llm_settings(fake_openai, DAILY_TOKEN_BUDGET_PER_IP=40, TRUSTED_PROXY_COUNT=1))

    def ask(query, client_address):
        body = {"ahp": "0.1", "capability": "content_search", "query": query}
        return post(client, body, ip="10.0.0.2", **{"X-Forwarded-For": f"198.51.100.1, {client_address}"})

    spent = ask("How is gyokuro grown?", "203.0.113.30")
    assert spent.json()["status"] == "success"
    assert ConverseSession.objects.get(pk=spent.json()["session_id"]).client_ip == "203.0.113.30"
    assert ask("How do I brew sencha?", "203.0.113.30").status_code == 429  # 42 tokens today >= 40
    assert ask("How do I brew sencha?", "203.0.113.31").json()["status"] == "success"  # behind the same proxy


# --- the session row is locked only to record a turn --------------------------------------------------------------


@pytest.fixture
def article(transactional_db, publish):
    return publish(
        Article,
        title="Oolong oxidation",
        slug="oolong-oxidation",
        body="Oolong tea is partially oxidised: the leaves are bruised, withered and rolled before they are fired. "
        "The longer the oxidation, the darker and toastier the cup.",
    )


def converse_over_http(base_url, body):
    request = urllib.request.Request(
        base_url + URL, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def row_lock_is_free(session_id):
    """From another database connection: can the session row be locked right now (SELECT ... FOR UPDATE
    NOWAIT)?"""
    try:
        with transaction.atomic():
            list(ConverseSession.objects.select_for_update(nowait=True).filter(pk=session_id))
        return True
    except DatabaseError:
        return False
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_the_answer_backend_runs_without_the_session_row_locked(live_server, settings, fake_openai, article):
    configure(settings, **llm_settings(fake_openai))
    question = {"ahp": "0.1", "capability": "content_search", "query": "How is oolong tea oxidised?"}
    status, first = converse_over_http(live_server.url, question)
    assert (status, first["meta"]["tokens_used"]) == (200, 42), first
    session_id = first["session_id"]

    seen = []

    def reply(request):  # runs in the fake server's thread while the view waits for the model
        seen.append(row_lock_is_free(session_id))
        return "Oolong is partially oxidised [1]."

    fake_openai.reply = reply
    status, second = converse_over_http(
        live_server.url, {**question, "query": "How long is it fired?", "session_id": session_id}
    )
    assert status == 200, second
    assert seen == [True]
    assert len(ConverseSession.objects.get(pk=session_id).turns) == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_never_exceed_the_session_limit(live_server, settings, fake_openai, article):
    # The relevance floor would answer an off-topic follow-up without the model (and break the barrier).
    configure(settings, **llm_settings(fake_openai, SESSION_MAX_TURNS=2, RELEVANCE_FLOOR=0))
    question = {"ahp": "0.1", "capability": "content_search", "query": "How is oolong tea oxidised?"}
    status, first = converse_over_http(live_server.url, question)
    assert status == 200, first
    both_answering = threading.Barrier(2, timeout=20)

    def reply(request):  # both requests are being answered at once: neither holds the row
        both_answering.wait()
        return "Oolong is partially oxidised [1]."

    fake_openai.reply = reply
    results = []
    follow_ups = [
        threading.Thread(
            target=lambda query=query: results.append(
                converse_over_http(live_server.url, {**question, "query": query, "session_id": first["session_id"]})
            )
        )
        for query in ("How long is oolong fired?", "Why is oolong rolled?")
    ]
    for thread in follow_ups:
        thread.start()
    for thread in follow_ups:
        thread.join()
    assert sorted(status for status, _ in results) == [200, 429]
    refused = next(body for status, body in results if status == 429)
    assert (refused["scope"], refused["retry_after"]) == ("session", None)
    session = ConverseSession.objects.get(pk=first["session_id"])
    assert len(session.turns) == 2
    assert session.tokens_used == 2 * 42


# --- token budgets under concurrent requests ----------------------------------------------------------------------


def answered_at_once(live_server, fake_openai, questions, **extra):
    """``questions`` sent at once over HTTP (one thread each); the model answers them together when they all reach
    it, else (some were refused first) after a short wait. Their (status, body), in no particular order."""
    all_answering = threading.Barrier(len(questions), timeout=3)

    def reply(request):
        with contextlib.suppress(threading.BrokenBarrierError):
            all_answering.wait()
        return "Oolong is partially oxidised [1]."

    fake_openai.reply = reply
    results = []
    threads = [
        threading.Thread(target=lambda query=query: results.append(converse_over_http(live_server.url, {
            "ahp": "0.1", "capability": "content_search", "query": query, **extra})))
        for query in questions
    ]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


FOLLOW_UPS = ("How long is oolong fired?", "Why is oolong rolled?", "Is oolong a green tea?")


@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_never_overshoot_the_sessions_token_budget(live_server, settings, fake_openai, article):
    """§11.4: a session may start an answer while its budget lasts. Three follow-ups sent at once when 8 tokens
    are left each found them left, and each spent 42: 3 x 42 past a budget one answer would have crossed."""
    limits = {"unauthenticated": {"requests": "100/minute", "token_budget": "50/session"}}
    configure(settings, **llm_settings(fake_openai, RATE_LIMITS=limits, RELEVANCE_FLOOR=0))
    question = {"ahp": "0.1", "capability": "content_search", "query": "How is oolong tea oxidised?"}
    status, first = converse_over_http(live_server.url, question)
    assert (status, first["meta"]["tokens_used"]) == (200, 42), first

    results = answered_at_once(live_server, fake_openai, FOLLOW_UPS, session_id=first["session_id"])
    assert sorted(status for status, _ in results) == [200, 429, 429], results
    assert {body.get("scope") for status, body in results if status == 429} == {"session_tokens"}
    assert ConverseSession.objects.get(pk=first["session_id"]).tokens_used == 2 * 42


@pytest.mark.django_db(transaction=True)
def test_concurrent_questions_never_overshoot_the_daily_token_budget(live_server, settings, fake_openai, article):
    """The same for the client network's daily budget: new sessions, each with a budget of its own, sent at once."""
    from agent_handshake.concierge.limits import daily_tokens_used

    configure(settings, **llm_settings(fake_openai, DAILY_TOKEN_BUDGET_PER_IP=50, RELEVANCE_FLOOR=0))
    question = {"ahp": "0.1", "capability": "content_search", "query": "How is oolong tea oxidised?"}
    assert converse_over_http(live_server.url, question)[0] == 200

    results = answered_at_once(live_server, fake_openai, FOLLOW_UPS)
    assert sorted(status for status, _ in results) == [200, 429, 429], results
    assert {body.get("scope") for status, body in results if status == 429} == {"ip"}
    assert daily_tokens_used("127.0.0.1") == 2 * 42


def reserved_at_once(reserve, count=8):
    """``reserve()`` called by ``count`` threads at once (each on its own database connection): what each got."""
    start = threading.Barrier(count, timeout=20)
    results = []

    def run():
        try:
            start.wait()
            results.append(reserve())
        except Exception as exc:
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_of_answers_reserving_the_last_tokens_at_once_one_starts():
    """limits.reserve_tokens, from eight threads at once on a session with 8 of its 50 tokens left and on a network
    with 8 of its 50 daily tokens left: one reservation is made on each, the others are refused (429), and
    releasing it gives back exactly what it held."""
    from agent_handshake.concierge import errors
    from agent_handshake.concierge.limits import add_daily_tokens, daily_tokens_used, reserve_tokens

    session = ConverseSession.objects.create(
        capability="content_search", client_ip="203.0.113.9", last_active_at=timezone.now(), tokens_used=42
    )
    results = reserved_at_once(lambda: reserve_tokens(ConverseSession.objects.get(pk=session.pk), 50, "x", 0, 80))
    made = [result for result in results if not isinstance(result, Exception)]
    refused = [result for result in results if isinstance(result, errors.RateLimited)]
    assert (len(made), len(refused)) == (1, 7), results
    assert {exc.details["scope"] for exc in refused} == {"session_tokens"}
    session.refresh_from_db()
    assert session.tokens_used == 42 + 80  # held while the one answer is written
    made[0].release()
    made[0].release()  # once
    session.refresh_from_db()
    assert session.tokens_used == 42

    add_daily_tokens("203.0.113.9", 42)
    results = reserved_at_once(lambda: reserve_tokens(session, 0, "203.0.113.9", 50, 80))
    made = [result for result in results if not isinstance(result, Exception)]
    refused = [result for result in results if isinstance(result, errors.RateLimited)]
    assert (len(made), len(refused)) == (1, 7), results
    assert {exc.details["scope"] for exc in refused} == {"ip"}
    assert daily_tokens_used("203.0.113.9") == 42 + 80
    made[0].release()
    assert daily_tokens_used("203.0.113.9") == 42


def test_a_reservation_refused_by_the_daily_budget_holds_nothing_on_the_session():
    from agent_handshake.concierge import errors
    from agent_handshake.concierge.limits import add_daily_tokens, daily_tokens_used, reserve_tokens

    session = ConverseSession.objects.create(
        capability="content_search", client_ip="203.0.113.9", last_active_at=timezone.now(), tokens_used=10
    )
    add_daily_tokens("203.0.113.9", 50)
    with pytest.raises(errors.RateLimited) as refused:
        reserve_tokens(session, 100, "203.0.113.9", 50, 80)
    assert refused.value.details["scope"] == "ip"
    session.refresh_from_db()
    assert (session.tokens_used, daily_tokens_used("203.0.113.9")) == (10, 50)
    reservation = reserve_tokens(session, 100, "198.51.100.7", 50, 80)  # another network, budgets left
    session.refresh_from_db()
    assert (session.tokens_used, daily_tokens_used("198.51.100.7")) == (90, 80)
    reservation.release()
    session.refresh_from_db()
    assert (session.tokens_used, daily_tokens_used("198.51.100.7")) == (10, 0)
