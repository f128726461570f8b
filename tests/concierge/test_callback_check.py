"""A callback URL's check is public (:func:`calls.check_callback`), made once, and given to a :class:`calls.Call`
by a front door that must check it before its own transaction (IntentWeb's message), as AHP's call checks it
before the call's: one refusal, worded and fielded by the front door's field name, wherever it is made."""

from __future__ import annotations

from agent_handshake.concierge import calls
from agent_handshake.concierge.conversation import Owner


def call_of(registries, name, url, **options):
    return calls.Call(
        capability=registries[1].get(name),
        owner=Owner.of(None, "192.0.2.10"),
        address="192.0.2.10",
        path="/agent/converse",
        protocol="ahp",
        callback_url=url,
        callback_field="context.callback_url",
        **options,
    )


def test_a_refused_callback_url_names_the_front_doors_field():
    assert calls.check_callback("").refusal is None
    check = calls.check_callback("http://192.0.2.1/hook", "context.callback_url")
    assert check.refusal.error.details["fields"] == ["context.callback_url"]
    assert str(check.refusal.error).startswith("context.callback_url is refused:")


def test_a_call_given_the_check_made_before_resolves_nothing_again(registries, settings, lookups):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"]}
    check = calls.check_callback("http://localhost/hook", "context.callback_url")
    assert lookups == ["localhost"]
    call = call_of(registries, "escalate_to_human", "http://localhost/hook", callback_check=check)
    assert call.check_callback() is None
    assert lookups == ["localhost"]
    # A check of another URL (or none) is no check of this one: the call makes its own, once.
    call = call_of(registries, "escalate_to_human", "http://192.0.2.1/hook", callback_check=check)
    assert call.check_callback().error.details["fields"] == ["context.callback_url"]
    assert call.check_callback() is call.check_callback()
