"""A client network's daily token budget refused only by the tokens its answers in progress hold (reservations,
which count for two RESERVATION_SLOT_SECONDS at most) is not exhausted: the 429 says so, and its Retry-After and
X-RateLimit-Reset are the end of those holds, not midnight. Tokens spent today still wait for midnight."""

from __future__ import annotations

import datetime
import json
import time

import pytest
from django.utils import timezone

from agent_handshake.concierge import errors
from agent_handshake.concierge.limits import (
    RESERVATION_SLOT_SECONDS,
    add_daily_tokens,
    daily_usage,
    reserve_tokens,
    seconds_until_tomorrow,
)
from agent_handshake.models import ConverseSession
from tests.ahp.test_converse import llm_settings

pytestmark = pytest.mark.django_db
BUDGET = 50
EXHAUSTED = "Daily token budget for this IP address is exhausted."


def session_of(network):
    return ConverseSession.objects.create(capability="content_search", client_ip=network, last_active_at=timezone.now())


def hold_end(reserved_at):
    """When a reservation made at ``reserved_at`` stops counting: the end of the slot after its own."""
    return (int(reserved_at // RESERVATION_SLOT_SECONDS) + 2) * RESERVATION_SLOT_SECONDS


def midnight():
    tomorrow = datetime.date.today() + datetime.timedelta(days=1)
    return datetime.datetime.combine(tomorrow, datetime.time.min).timestamp()


@pytest.fixture
def budget(settings, fake_openai):
    configured = llm_settings(fake_openai, DAILY_TOKEN_BUDGET_PER_IP=BUDGET)
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, **configured}
    return BUDGET


def converse(client, query, ip):
    body = {"ahp": "0.1", "capability": "content_search", "query": query}
    return client.post("/agent/converse", json.dumps(body), content_type="application/json", REMOTE_ADDR=ip)


def ask(client, query, ip):
    body = {"query": {"text": query}, "prefer": {"streaming": False, "mode": "summarize"}}
    return client.post("/ask", json.dumps(body), content_type="application/json", REMOTE_ADDR=ip)


def assert_held_refusal(response, reserved_at, before, after):
    """A 429 of a budget held by answers in progress: said so, and told to retry when the hold ends."""
    assert response.status_code == 429, response.content
    retry_after = int(response.headers["Retry-After"])
    assert hold_end(reserved_at) - after - 1 <= retry_after <= hold_end(reserved_at) - before + 1
    assert 1 <= retry_after <= 2 * RESERVATION_SLOT_SECONDS
    assert int(response.headers["X-RateLimit-Reset"]) == hold_end(reserved_at)
    assert (response.headers["X-RateLimit-Limit"], response.headers["X-RateLimit-Remaining"]) == (str(BUDGET), "0")
    return retry_after


def test_an_answer_in_progress_holding_the_budget_is_not_an_exhausted_budget(client, budget, demo_content):
    network = "203.0.113.60"
    reserved_at = time.time()
    held = reserve_tokens(session_of(network), 0, network, budget, budget)  # another answer, being written

    before = time.time()
    refused = converse(client, "How is gyokuro grown?", network)
    after = time.time()
    retry_after = assert_held_refusal(refused, reserved_at, before, after)
    body = refused.json()
    assert (body["code"], body["scope"], body["retry_after"]) == ("rate_limited", "ip", retry_after)
    assert "in progress" in body["message"], body["message"]
    assert body["message"] != EXHAUSTED

    # The same through NLWeb's door.
    before = time.time()
    refused = ask(client, "How do I brew sencha?", network)
    after = time.time()
    assert_held_refusal(refused, reserved_at, before, after)
    error = refused.json()["error"]
    assert error["code"] == "RATE_LIMITED"
    assert "in progress" in error["message"], error
    assert error["message"] != EXHAUSTED

    held.release()  # that answer is done, having spent nothing: the budget is there again at once
    assert converse(client, "What is matcha?", network).json()["status"] == "success"


def test_a_budget_spent_today_still_waits_for_midnight(client, budget, demo_content):
    network = "203.0.113.61"
    add_daily_tokens(network, budget)
    refused = converse(client, "How is gyokuro grown?", network)
    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert body["message"] == EXHAUSTED
    assert abs(int(refused.headers["Retry-After"]) - seconds_until_tomorrow()) <= 2
    assert body["retry_after"] == int(refused.headers["Retry-After"])
    assert abs(int(refused.headers["X-RateLimit-Reset"]) - midnight()) <= 2


def test_the_hold_ends_when_enough_of_it_has_expired(budget):
    """reserve_tokens and daily_usage: the refusal waits until the spent tokens and the holds still counting fit in
    the budget (the first hold's end, if that is enough), and for midnight when the spent tokens alone fill it."""
    network = "203.0.113.62"
    session = session_of(network)
    slot = int(datetime.datetime.combine(datetime.date.today(), datetime.time(12)).timestamp())
    slot -= slot % RESERVATION_SLOT_SECONDS
    add_daily_tokens(network, 20)
    reserve_tokens(session, 0, network, budget, 25, now=slot + 10)  # never released
    reserve_tokens(session, 0, network, budget, 10, now=slot + RESERVATION_SLOT_SECONDS + 10)  # nor this one
    now = slot + RESERVATION_SLOT_SECONDS + 100  # 20 + 25 + 10 >= 50; the first hold ends at slot + 2 slots
    with pytest.raises(errors.RateLimited) as refused:
        reserve_tokens(session, 0, network, budget, 5, now=now)
    assert refused.value.details["retry_after"] == slot + 2 * RESERVATION_SLOT_SECONDS - now
    assert "in progress" in refused.value.message
    assert refused.value.message != EXHAUSTED

    usage = daily_usage(network, now=now)
    assert (usage.exceeded, usage.remaining, usage.reset) == (True, 0, slot + 2 * RESERVATION_SLOT_SECONDS)

    # With 20 more spent, 40 + 10 still fill the budget after the first hold: the second's end.
    add_daily_tokens(network, 20)
    with pytest.raises(errors.RateLimited) as refused:
        reserve_tokens(session, 0, network, budget, 5, now=now)
    assert refused.value.details["retry_after"] == slot + 3 * RESERVATION_SLOT_SECONDS - now
    assert daily_usage(network, now=now).reset == slot + 3 * RESERVATION_SLOT_SECONDS

    # Spent alone: midnight.
    add_daily_tokens(network, 10)
    with pytest.raises(errors.RateLimited) as refused:
        reserve_tokens(session, 0, network, budget, 5, now=now)
    assert refused.value.message == EXHAUSTED
    assert abs(refused.value.details["retry_after"] - (midnight() - now)) <= 1
    assert abs(daily_usage(network, now=now).reset - midnight()) <= 1
