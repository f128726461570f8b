"""The replay guards' clean-up (:meth:`SpentValue.forget_before`) honours a batch limit, as a write's purge of
accepted signatures needs (:func:`purging.purge_after_write`): the oldest rows first, no more than the limit."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agent_handshake.concierge import purging
from agent_handshake.models import IntentNonce, SeenSignature

pytestmark = pytest.mark.django_db


#: The rows the oldest-first tests make, newest first: each is made an hour before the one before it.
AGED = ("fresh", "old", "older", "oldest")


def assert_forgotten_oldest_first(model, field: str = "pk") -> None:
    """The rows of ``model`` whose ``field`` is one of AGED, aged as it says: ``forget_before`` a cutoff ten minutes
    ago forgets the oldest first, no more than its limit, and keeps the fresh one."""
    now = timezone.now()
    for age, value in enumerate(AGED):
        model.objects.filter(**{field: value}).update(created_at=now - datetime.timedelta(hours=age))
    cutoff = now - datetime.timedelta(minutes=10)
    assert model.forget_before(cutoff, limit=2) == 2
    assert sorted(model.objects.values_list(field, flat=True)) == ["fresh", "old"]
    assert model.forget_before(cutoff, limit=5) == 1
    assert model.forget_before(cutoff) == 0
    assert list(model.objects.values_list(field, flat=True)) == ["fresh"]


def assert_a_writes_purge_stays_within_its_batch(model, now: datetime.datetime, field: str = "pk") -> None:
    """``PURGE_BATCH + 3`` rows of ``model`` expired at ``now``, and one "recent": a write's purge forgets a batch of
    them, the next purge the rest."""
    purging.purge_after_write(model)
    assert model.objects.count() == 4
    assert purging.purge_expired(model, now) == 3
    assert list(model.objects.values_list(field, flat=True)) == ["recent"]


@pytest.mark.parametrize("model", [SeenSignature, IntentNonce])
def test_forgetting_spent_values_takes_the_oldest_first_and_no_more_than_the_limit(model):
    for value in AGED:
        model.spend(value)
    assert_forgotten_oldest_first(model)


def test_a_writes_purge_of_accepted_signatures_stays_within_its_batch(settings):
    now = timezone.now()
    expired = now - datetime.timedelta(seconds=2 * 300 + 60)
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "SIGNATURE_MAX_SKEW": 300}
    SeenSignature.objects.bulk_create(SeenSignature(signature=f"{n:064x}") for n in range(purging.PURGE_BATCH + 3))
    SeenSignature.objects.update(created_at=expired)
    SeenSignature.spend("recent")
    assert_a_writes_purge_stays_within_its_batch(SeenSignature, now)
