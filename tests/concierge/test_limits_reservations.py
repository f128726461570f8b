"""Token reservations (limits.reserve_tokens) that are never released, as when the process writing the answer is
killed: they hold the client network's daily budget for a bounded time, not until the next day."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agent_handshake.concierge import errors
from agent_handshake.concierge.limits import (
    RESERVATION_SLOT_SECONDS,
    add_daily_tokens,
    daily_tokens_used,
    reserve_tokens,
)
from agent_handshake.models import ConverseSession

pytestmark = pytest.mark.django_db


def test_a_reservation_never_released_stops_holding_the_daily_budget_after_two_slots():
    network = "203.0.113.40"
    session = ConverseSession.objects.create(
        capability="content_search", client_ip=network, last_active_at=timezone.now()
    )
    noon = datetime.datetime.combine(datetime.date.today(), datetime.time(12)).timestamp()
    add_daily_tokens(network, 42)  # spent today
    reserve_tokens(session, 0, network, 90, 50, now=noon)  # its answer's process is killed: never released
    assert daily_tokens_used(network, now=noon) == 42 + 50
    with pytest.raises(errors.RateLimited):  # 92 of its 90 counted: spent
        reserve_tokens(session, 0, network, 90, 50, now=noon)
    a_slot_on = noon + RESERVATION_SLOT_SECONDS
    assert daily_tokens_used(network, now=a_slot_on) == 42 + 50  # an answer may take that long: still held
    two_slots_on = noon + 2 * RESERVATION_SLOT_SECONDS
    assert daily_tokens_used(network, now=two_slots_on) == 42  # what was spent stays counted for the day
    reservation = reserve_tokens(session, 0, network, 90, 50, now=two_slots_on)
    assert daily_tokens_used(network, now=two_slots_on) == 42 + 50
    reservation.release()
    assert daily_tokens_used(network, now=two_slots_on) == 42


@pytest.fixture
def database_cache(settings):
    """Django's database cache as CACHE_ALIAS (its default TIMEOUT, 300 s), its table created for the test."""
    from django.core.management import call_command

    settings.CACHES = {
        **settings.CACHES,
        "db": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "agent_test_cache"},
    }
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CACHE_ALIAS": "db"}
    call_command("createcachetable", "agent_test_cache", verbosity=0)
    return "agent_test_cache"


def test_the_daily_budget_lasts_the_day_on_a_cache_whose_incr_resets_the_expiry(database_cache):
    """Django's database (and file) cache increments with a get and a set, and the set gives the counter the cache's
    default timeout: the day's counter expired five minutes after its last answer, and the budget with it."""
    from django.db import connection

    network = "203.0.113.41"
    add_daily_tokens(network, 30)
    add_daily_tokens(network, 12)
    assert daily_tokens_used(network) == 42
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT expires FROM {database_cache} WHERE cache_key LIKE %s", [f"%tokens:{network}:%"])
        (expires,) = cursor.fetchone()
    assert expires - timezone.now() > datetime.timedelta(hours=23)


def test_a_released_reservation_leaves_its_slot_counting_the_others_on_such_a_cache(database_cache):
    """Giving a reservation back is a decrement, on these caches also a get and a set: the slot's counter, which
    holds the other answers' reservations too, was given the cache's default timeout (five minutes, not its three
    slots)."""
    from django.db import connection

    network = "203.0.113.42"
    session = ConverseSession.objects.create(
        capability="content_search", client_ip=network, last_active_at=timezone.now()
    )
    held = reserve_tokens(session, 0, network, 1000, 50)
    reserve_tokens(session, 0, network, 1000, 30).release()
    assert daily_tokens_used(network) == 50
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT expires FROM {database_cache} WHERE cache_key LIKE %s", [f"%tokens-held:{network}:%"])
        (expires,) = cursor.fetchone()
    assert expires - timezone.now() > datetime.timedelta(seconds=2 * RESERVATION_SLOT_SECONDS)
    held.release()
