"""IntentWeb's ``POST /intent`` in real transactions (committed, seen by other connections): a message's admission
(its nonce spent, its chain's keys read, its interaction locked) is one statement, and two final turns of one
interaction sent at once run its capability once."""

from __future__ import annotations

import datetime
import json
import threading
import time

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_handshake.models import IntentNonce, Interaction, Job, TrustedActorKey
from tests.intentweb.test_intentweb import Agent, only_title_lookup

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def title_lookup(registries):
    """The only MODE3 capability: one free-text field, and a record of each run."""
    return only_title_lookup(registries[1])


def started(agent: Agent) -> None:
    status, reply = agent.send("intent_request", "Look up a page by its title")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply


def test_a_final_turn_is_admitted_in_one_statement_and_runs_in_one_transaction(client, title_lookup):
    agent = Agent(client)
    TrustedActorKey.objects.create(actor_id=agent.actor_id, public_key=agent.public_key)
    started(agent)
    body = agent.envelope("information_response", "Why gyokuro is shaded")
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/intent", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    reply = response.json()
    agent.check(reply)
    assert reply["flow_type"] == "execution_result"
    assert "verified with its registered key" in reply["explicability"][0]["assumptions"][0]
    # Now and then a message forgets old nonces after its commit: not part of its transaction.
    statements = [query["sql"] for query in queries.captured_queries if not query["sql"].startswith("DELETE")]
    nonces, keys = IntentNonce._meta.db_table, TrustedActorKey._meta.db_table
    (admission,) = [sql for sql in statements if nonces in sql and "created_at <" not in sql]
    assert keys in admission
    assert Interaction._meta.db_table in admission
    assert "FOR UPDATE" in admission
    assert not [sql for sql in statements if "FOR UPDATE" in sql and sql != admission]  # no lock of its own
    assert not [sql for sql in statements if keys in sql and sql != admission]  # no key read of its own
    # The capability's savepoint (its writes undone if it refuses) is the only one: the message's transaction is
    # the call's too.
    assert len([sql for sql in statements if sql.startswith("SAVEPOINT")]) == 1, statements
    assert statements[-1] == "COMMIT"
    assert title_lookup == ["Why gyokuro is shaded"]


def test_two_final_turns_at_once_run_the_capability_once(client, title_lookup):
    agent = Agent(client)
    started(agent)
    finals = [agent.envelope("information_response", "Why gyokuro is shaded") for _ in range(2)]  # two nonces
    answers: list[tuple[int, dict]] = []

    def send(body: dict) -> None:
        try:
            response = Client().post("/intent", json.dumps(body), content_type="application/json")
            answers.append((response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(body,)) for body in finals]
    with transaction.atomic():
        Interaction.objects.select_for_update().get(interaction_id=agent.interaction_id)  # held until both wait
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        assert all(thread.is_alive() for thread in threads), answers  # each waits for the row in its admission
        assert not title_lookup
    for thread in threads:
        thread.join(timeout=60)
    for _, reply in answers:
        agent.check(reply)
    outcomes = sorted((status, reply["flow_type"], reply.get("status")) for status, reply in answers)
    assert outcomes == [(200, "execution_result", "confirmed"), (409, "error", "interaction_closed")]
    assert title_lookup == ["Why gyokuro is shaded"]
    # The refused one spent nothing: its nonce is free (and the interaction is closed to it).
    assert IntentNonce.objects.filter(nonce__in=[body["attribution"]["nonce"] for body in finals]).count() == 1


def test_old_nonces_are_forgotten_outside_the_messages_transaction():
    from agent_handshake.concierge.interaction_admission import forget_old_nonces
    from agent_handshake.conf import app_settings

    old = IntentNonce.objects.create(nonce="old-nonce")
    recent = IntentNonce.objects.create(nonce="recent-nonce")
    past = timezone.now() - datetime.timedelta(seconds=2 * app_settings.INTENT_MAX_SKEW + 60)
    IntentNonce.objects.filter(pk=old.pk).update(created_at=past)
    forget_old_nonces()
    assert list(IntentNonce.objects.values_list("nonce", flat=True)) == [recent.nonce]


class SplitRouter:
    """Puts the nonces on another database than the interactions."""

    def db_for_write(self, model, **hints):
        return "other" if model is IntentNonce else None


def test_the_nonce_the_keys_and_the_interaction_must_share_a_database():
    from django.core.exceptions import ImproperlyConfigured

    from agent_handshake.concierge.interaction_admission import database

    assert database() == "default"
    with override_settings(DATABASE_ROUTERS=[f"{__name__}.SplitRouter"]), pytest.raises(ImproperlyConfigured):
        database()


def test_the_callback_hosts_dns_lookup_holds_no_transaction_nor_the_interactions_row(
    client, registries, settings, callback_host_lookups
):
    """An async intent's callback_url is checked (its host resolved) when the job is accepted, which takes as long
    as DNS does: seconds for a slow name server, whose name the agent chooses. Done inside the message's
    transaction, the interaction stays row-locked (and its nonce's insert pending) that long. The lookup is done
    before the transaction; the delivery resolves and checks again, and connects to the address it checked."""
    import agent_handshake
    from tests.intentweb.test_intentweb import key

    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"]}
    for capability in list(registries[1]):
        if capability.action_type:
            registries[1].unregister(capability.name)
    agent_handshake.capability(
        "book_later",
        description="Book a tasting slot.",
        action_type="async",
        input_schema={"type": "object", "required": ["time"], "properties": {"time": {"type": "string"}}},
        output_schema={"type": "object"},
    )(lambda invocation: agent_handshake.Outcome({}, answer="Booked."))
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "Book a tasting slot")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply

    def interaction_locked() -> bool:
        try:
            with transaction.atomic():
                Interaction.objects.select_for_update(nowait=True).get(interaction_id=agent.interaction_id)
            return False
        except Exception:
            return True
        finally:
            connection.close()

    # A callback URL the site refuses is still refused where it was, once the input is complete: no job.
    status, reply = agent.send("information_response", "11:00", collected_information={"time": "11:00"},
                               callback_url="http://192.0.2.1/hook")  # fmt: skip
    assert (status, reply["status"]) == (400, "invalid_request"), reply
    assert reply["fields"] == ["callback_url"]  # as the refusal names it: send another
    assert not Job.objects.exists()

    during_lookup = callback_host_lookups(interaction_locked)
    status, reply = agent.send("information_response", "11:00", collected_information={"time": "11:00"},
                               callback_url="http://localhost/hook")  # fmt: skip
    assert (status, reply["status"]) == (200, "accepted"), reply
    assert during_lookup == [{"in_transaction": False, "locked": False}]
    assert Job.objects.get().callback_url == "http://localhost/hook"
