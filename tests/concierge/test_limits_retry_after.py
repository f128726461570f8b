"""Retry-After and the ``X-RateLimit-*`` headers when more than one limit stands in a request's way (§11.1).

A request is counted on several counters: its sender's request count (per API key, or per client network and per
``requesting_agent`` from it), a capability's own limit, and the client network's daily token budget. A 429 names
one of them, but the request can only succeed once none of them refuses it: Retry-After is the longest wait
among the counters that will refuse it again, and the four headers describe that counter.
"""

from __future__ import annotations

import json
import time

import pytest

from agent_handshake.concierge.limits import add_daily_tokens, daily_tokens_used, seconds_until_tomorrow
from tests.ahp.test_converse import llm_settings
from tests.ahp.test_mode3 import bearer, booking, converse, issue, next_open_day
from tests.concierge.test_limits import UNKNOWN, configure, post

pytestmark = pytest.mark.django_db
IP = "192.0.2.1"


def ask(client, query, session_id=None):
    return post(client, {"ahp": "0.1", "capability": "content_search", "query": query, "session_id": session_id})


def headers(response):
    return {name: int(response[name]) for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")}


def test_a_request_refused_while_the_daily_token_budget_is_spent_waits_for_the_budget(
    client, settings, demo_content, fake_openai
):
    """The per-minute count and the daily token budget: once the budget is spent, a request the per-minute count
    refuses cannot succeed when the minute is over either, so it is told to wait for the budget. (Before, a
    request refused by the daily budget said "until tomorrow" with the headers of the per-minute count, and the
    next one, refused by that count, said a few seconds.)"""
    per_minute = {"unauthenticated": {"requests": "3/minute"}}
    configure(settings, **llm_settings(fake_openai, DAILY_TOKEN_BUDGET_PER_IP=40, RATE_LIMITS=per_minute))
    assert ask(client, "How is gyokuro grown?").json()["status"] == "success"  # 42 tokens: the budget is spent
    assert daily_tokens_used(IP) == 42

    by_budget = ask(client, "How do I brew sencha?")  # the second request of the minute: refused by the budget
    until_tomorrow = seconds_until_tomorrow()
    assert (by_budget.status_code, by_budget.json()["scope"]) == (429, "ip")
    # The headers describe the budget that refused it, not the request count (1 of 3 left).
    assert headers(by_budget) == {
        "X-RateLimit-Limit": 40,
        "X-RateLimit-Remaining": 0,
        "X-RateLimit-Reset": pytest.approx(int(time.time()) + until_tomorrow, abs=2),
    }
    assert by_budget["X-RateLimit-Window"] == "86400"
    assert int(by_budget["Retry-After"]) == pytest.approx(until_tomorrow, abs=2)

    assert ask(client, "What is hojicha?").status_code == 429  # the third: the budget again
    by_count = ask(client, "What is matcha?")  # the fourth: the per-minute count refuses it first
    assert by_count.status_code == 429
    wait = int(by_count["Retry-After"])
    assert wait >= seconds_until_tomorrow() - 2, "told to retry before the daily budget is back"
    assert by_count.json()["retry_after"] == pytest.approx(wait, abs=1)
    assert int(by_count["X-RateLimit-Reset"]) == pytest.approx(int(time.time()) + wait, abs=2)
    assert int(by_count["X-RateLimit-Remaining"]) == 0
    assert daily_tokens_used(IP) == 42  # the refused requests spent nothing


def test_an_agent_refused_while_its_network_has_no_request_left_waits_for_the_network(client, settings):
    """The per-agent and per-IP counts: the request that uses the network's last request of the day is refused by
    the agent name's per-minute count. Told to wait for the name's minute, the agent would be refused by the
    network's count until its day ends."""
    configure(settings, AGENT_RATE_LIMIT="1/minute", RATE_LIMITS={"unauthenticated": {"requests": "3/day"}})
    named = {**UNKNOWN, "context": {"requesting_agent": "bot"}}
    network_reset = int(post(client, UNKNOWN)["X-RateLimit-Reset"])  # the network's count alone: 1 of 3
    first = post(client, named)  # 2 of 3; the name's 1 of 1
    assert first.status_code == 400
    name_reset = int(first["X-RateLimit-Reset"])  # the tightest: the name's

    refused = post(client, named)  # 3 of 3, and the name's second this minute
    assert (refused.status_code, refused.json()["scope"]) == (429, "agent")
    binding = max(network_reset, name_reset)
    assert int(refused["X-RateLimit-Reset"]) == pytest.approx(binding, abs=1)
    assert refused["X-RateLimit-Limit"] == ("3" if network_reset > name_reset else "1")
    assert refused["X-RateLimit-Remaining"] == "0"
    # The next request, whatever it names, is refused by the network's count until it resets.
    after = post(client, UNKNOWN)
    assert (after.status_code, after.json()["scope"]) == (429, "ip")
    assert int(refused["Retry-After"]) >= int(after["Retry-After"]) - 1


def test_a_capability_refused_by_its_own_limit_does_not_wait_for_the_token_budget(client, settings):
    """An action's own limit refuses a MODE3 call, which spends no tokens: the daily budget being spent does not
    make it wait for tomorrow."""
    configure(settings, ACTION_RATE_LIMIT="1/minute", DAILY_TOKEN_BUDGET_PER_IP=40)
    add_daily_tokens("127.0.0.1", 50)  # the test client's address
    _, secret = issue()
    statuses = []
    for hour in (10, 11):
        day, at = next_open_day(hour)
        statuses.append(converse(client, booking(day, at), **bearer(secret)))
    assert [response.status_code for response in statuses] == [200, 429]
    limited = statuses[-1]
    assert int(limited["Retry-After"]) <= 60
    assert limited["X-RateLimit-Limit"] == "1"
    assert limited.json()["retry_after"] == pytest.approx(int(limited["Retry-After"]), abs=1)


def test_every_429_says_when_to_retry(client, settings, demo_content):
    """§11.1: a 429 MUST carry Retry-After, the session limits' included, whose body says ``retry_after: null``
    (the same session will not do): a new session may ask at once, unless a counter says otherwise."""
    configure(settings, SESSION_MAX_TURNS=1, RATE_LIMITS={"unauthenticated": {"requests": "3/day"}})
    first = ask(client, "How is gyokuro grown?").json()  # 1 of 3
    refused = ask(client, "And sencha?", session_id=first["session_id"])  # 2 of 3
    assert (refused.status_code, refused.json()["scope"], refused.json()["retry_after"]) == (429, "session", None)
    assert refused["Retry-After"] == "1"

    refused = ask(client, "And matcha?", session_id=first["session_id"])  # 3 of 3
    assert (refused.status_code, refused.json()["scope"]) == (429, "session")
    # A new session's question would be refused by the network's count until its day ends.
    assert int(refused["Retry-After"]) == pytest.approx(int(refused["X-RateLimit-Reset"]) - time.time(), abs=2)
    assert refused["X-RateLimit-Remaining"] == "0"
    assert json.loads(ask(client, "What is matcha?").content)["scope"] == "ip"


def test_a_network_refused_while_the_agent_name_has_no_request_left_waits_for_the_name(client, settings):
    """The per-IP and per-agent counts the other way round: the network's per-minute count refuses a request whose
    agent name has no request left today. Told to wait for the minute, the agent would be refused by its name's
    count until the day ends."""
    configure(settings, AGENT_RATE_LIMIT="1/day", RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    named = {**UNKNOWN, "context": {"requesting_agent": "bot"}}
    first = post(client, named)  # the network's 1 of 2, the name's 1 of 1 today
    assert (first.status_code, first["X-RateLimit-Limit"], first["X-RateLimit-Remaining"]) == (400, "1", "0")
    name_reset = int(first["X-RateLimit-Reset"])
    assert post(client, UNKNOWN).status_code == 400  # the network's 2 of 2
    refused = post(client, named)
    assert (refused.status_code, refused.json()["scope"]) == (429, "ip")
    # Sent when told, once the network's minute is over, it would be refused by the name's count.
    assert int(refused["Retry-After"]) >= name_reset - time.time() - 2
    assert int(refused["X-RateLimit-Reset"]) == pytest.approx(name_reset, abs=1)
