"""The replay guards' clean-up (:meth:`SpentValue.forget_before`) honours a batch limit, as a write's purge of
accepted signatures needs (:func:`jobs.purge_after_write`): the oldest rows first, no more than the limit."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agent_handshake.concierge import jobs
from agent_handshake.models import IntentNonce, SeenSignature

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [SeenSignature, IntentNonce])
def test_forgetting_spent_values_takes_the_oldest_first_and_no_more_than_the_limit(model):
    now = timezone.now()
    for age, value in enumerate(["fresh", "old", "older", "oldest"]):
        model.spend(value)
        model.objects.filter(pk=value).update(created_at=now - datetime.timedelta(hours=age))
    cutoff = now - datetime.timedelta(minutes=10)
    assert model.forget_before(cutoff, limit=2) == 2
    assert sorted(model.objects.values_list("pk", flat=True)) == ["fresh", "old"]
    assert model.forget_before(cutoff, limit=5) == 1
    assert model.forget_before(cutoff) == 0
    assert list(model.objects.values_list("pk", flat=True)) == ["fresh"]


def test_a_writes_purge_of_accepted_signatures_stays_within_its_batch(settings):
    now = timezone.now()
    expired = now - datetime.timedelta(seconds=2 * 300 + 60)
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "SIGNATURE_MAX_SKEW": 300}
    SeenSignature.objects.bulk_create(SeenSignature(signature=f"{n:064x}") for n in range(jobs.PURGE_BATCH + 3))
    SeenSignature.objects.update(created_at=expired)
    SeenSignature.spend("recent")
    jobs.purge_after_write(SeenSignature)
    assert SeenSignature.objects.count() == 4
    assert jobs.purge_expired(SeenSignature, now) == 3
    assert list(SeenSignature.objects.values_list("pk", flat=True)) == ["recent"]
