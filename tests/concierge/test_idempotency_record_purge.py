"""Idempotency records are forgotten by the code that forgets spent values (:meth:`SpentValue.forget_before`): the
oldest first, a batch at most, as the purge after each write (:func:`purging.purge_after_write`) needs."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agent_handshake.concierge import purging
from agent_handshake.models import AgentClient, ApiKey, IdempotencyRecord
from tests.concierge.test_spent_value_purge import (
    AGED,
    assert_a_writes_purge_stays_within_its_batch,
    assert_forgotten_oldest_first,
)

pytestmark = pytest.mark.django_db


def records(*keys: str) -> list[IdempotencyRecord]:
    client = AgentClient.objects.create(name="Idempotent agent")
    key, _ = ApiKey.objects.issue(client, scopes=["*"])
    return [
        IdempotencyRecord.objects.create(api_key=key, key=name, request_hash="x", status_code=200, body={})
        for name in keys
    ]


def test_forgetting_idempotency_records_takes_the_oldest_first_and_no_more_than_the_limit():
    records(*AGED)
    assert_forgotten_oldest_first(IdempotencyRecord, "key")


def test_a_writes_purge_of_idempotency_records_stays_within_its_batch(settings):
    now = timezone.now()
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "IDEMPOTENCY_TTL": 3600}
    expired = records(*(f"old-{n}" for n in range(purging.PURGE_BATCH + 3)))
    IdempotencyRecord.objects.filter(pk__in=[record.pk for record in expired]).update(
        created_at=now - datetime.timedelta(seconds=3600 + 60)
    )
    IdempotencyRecord.objects.create(
        api_key=expired[0].api_key, key="recent", request_hash="x", status_code=200, body={}
    )
    assert_a_writes_purge_stays_within_its_batch(IdempotencyRecord, now, "key")
