"""Outgoing callbacks to a hostile receiver: what it can make the site store or do.

The receivers are real HTTP servers on 127.0.0.1 (tests/settings.py lets callbacks reach 127.0.0.1/32); the jobs
are started through POST /agent/converse with an API key and delivered by the worker's own function.
"""

from __future__ import annotations

import ipaddress

import pytest

from agent_handshake import tasks
from agent_handshake.concierge import job_callbacks
from agent_handshake.concierge.callbacks import UnsafeCallbackURL, address_refusal, check_callback_url, deliver
from agent_handshake.models import Job
from tests.concierge.test_blocked_agent_jobs import start_report
from tests.concierge.test_callbacks import Receiver, callback_settings
from tests.concierge.test_revoked_key_jobs import Holder

pytestmark = pytest.mark.django_db


def test_a_redirect_with_control_characters_in_its_location_is_recorded_not_a_crash(client):
    """A receiver answering 302 with a NUL (and a terminal escape) in its Location: the attempt is recorded, given up
    (redirects are not followed), with the Location quoted without raw control characters. PostgreSQL refuses NUL in
    text, so the raw value rolled the attempt back: the callback stayed pending, uncounted, and recovery re-sent it
    forever."""
    holder = Holder()
    hook = Receiver(status=302, headers={"Location": "http://x.example/\x00\x1b[31mred\x7f"}, body=b"").start()
    try:
        job_id = start_report(client, holder, hook.url())
        assert tasks.run_job(job_id) == Job.Status.SUCCESS
        assert job_callbacks.deliver_callback(job_id) is None  # a redirect is not tried again
        assert len(hook.requests) == 1
    finally:
        hook.stop()
    job = Job.objects.get(pk=job_id)
    assert (job.callback_state, job.callback_attempts, job.callback_last_status) == (Job.Callback.FAILED, 1, 302)
    error = job.callback_last_error
    assert error.startswith("redirect 302 not followed (Location: http://x.example/")
    assert not any(ord(char) < 0x20 or ord(char) == 0x7F for char in error), error
    assert "red" in error  # the printable rest is still shown


# IANA's special-purpose registries mark these "globally reachable: false"; Python 3.11's ipaddress (before 3.11.10)
# calls them global. 192.0.0.192 is Oracle Cloud Classic's instance metadata service.
NOT_GLOBALLY_REACHABLE = [
    "192.0.0.192",
    "192.0.0.8",  # the IPv4 dummy address (RFC 7600)
    "192.0.0.100",
    "192.0.0.255",
    "::ffff:192.0.0.192",
    "64:ff9b::c000:c0",  # NAT64 of 192.0.0.192
    "2002:c000:c0::1",  # 6to4 of 192.0.0.192
    "3fff::1",  # IPv6 documentation (RFC 9637)
    "3fff:fff:ffff::1",
]


@pytest.mark.parametrize("address", NOT_GLOBALLY_REACHABLE)
def test_ranges_not_globally_reachable_are_refused(address):
    assert address_refusal(ipaddress.ip_address(address)) == "not globally routable"
    host = f"[{address}]" if ":" in address else address
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=[], CALLBACK_REQUIRE_HTTPS=True):
        with pytest.raises(UnsafeCallbackURL, match="not globally routable"):
            check_callback_url(f"https://{host}/hook")
        result = deliver(f"https://{host}/hook", b"{}", {})
    assert (result.delivered, result.retryable, result.address) == (False, False, None)
    assert result.error.startswith("refused: ")


@pytest.mark.parametrize("address", ["192.0.0.9", "192.0.0.10", "192.0.1.1", "2a00:1450:4001::1", "3fff:1000::1"])
def test_neighbouring_global_addresses_stay_allowed(address):
    """PCP and TURN anycast (192.0.0.9, .10) are globally reachable; the next block and 3fff:1000:: lie outside."""
    assert address_refusal(ipaddress.ip_address(address)) is None
