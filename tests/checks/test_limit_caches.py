"""Check W008 looks at every cache the limits count in: the token budgets' ``CACHE_ALIAS`` and the request
counters' cache, which is django-ratelimit's ``RATELIMIT_USE_CACHE`` ("default" unless set), not ``CACHE_ALIAS``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from agent_handshake.checks.caches import check_cache
from tests.checks.test_system_checks import ids
from tests.concierge.test_limits import UNKNOWN, configure

pytestmark = pytest.mark.django_db
DUMMY = "django.core.cache.backends.dummy.DummyCache"
LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "limits-checks"}


def send(client):
    return client.post("/agent/converse", json.dumps(UNKNOWN), content_type="application/json")


def test_w008_when_the_request_counters_cache_cannot_count(client, settings):
    """CACHE_ALIAS on a cache that counts, the request counters in "default", a dummy cache: no request is ever
    refused (each finds its count at 1), and the check said nothing."""
    settings.CACHES = {"default": {"BACKEND": DUMMY}, "counting": LOCMEM}
    configure(settings, CACHE_ALIAS="counting", RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    assert [send(client).status_code for _ in range(4)] == [400] * 4  # what the warning is about
    messages = check_cache()
    assert ids(messages) == ["agent_handshake.W008"]
    assert "RATELIMIT_USE_CACHE" in messages[0].msg
    assert "'default'" in messages[0].msg
    assert "W008" in _check_output()

    settings.RATELIMIT_USE_CACHE = "counting"  # the request counters where the budgets are: counted, and quiet
    assert [send(client).status_code for _ in range(3)] == [400, 400, 429]
    assert check_cache() == []


def test_w008_names_each_cache_once(settings):
    settings.CACHES = {"default": {"BACKEND": DUMMY}}
    messages = check_cache()
    assert ids(messages) == ["agent_handshake.W008"]
    assert "CACHE_ALIAS" in messages[0].msg
    assert "RATELIMIT_USE_CACHE" in messages[0].msg


@pytest.mark.parametrize("setting", ["RATELIMIT_USE_CACHE", "CACHE_ALIAS"])
def test_e016_a_cache_setting_that_names_no_cache(settings, setting):
    """A RATELIMIT_USE_CACHE or CACHE_ALIAS that names no cache made every agent request a 500, and no check said
    so (in DEBUG too)."""
    settings.DEBUG = True
    if setting == "CACHE_ALIAS":
        configure(settings, CACHE_ALIAS="missing")
    else:
        settings.RATELIMIT_USE_CACHE = "missing"
    assert send(Client(raise_request_exception=False)).status_code == 500  # what the error is about
    messages = check_cache()
    assert ids(messages) == ["agent_handshake.E016"]
    assert setting in messages[0].msg
    assert "'missing'" in messages[0].msg
    with pytest.raises(SystemCheckError, match=r"agent_handshake\.E016"):
        _check_output()


def _check_output() -> str:
    out, err = StringIO(), StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()
