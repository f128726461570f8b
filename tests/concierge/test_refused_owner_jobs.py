"""An operator's refusal of a job's owner, seen by a real gunicorn and Celery worker (``tests/concierge/test_jobs.py``):
a blocked DID (``tests/concierge/test_blocked_agent_jobs.py``), a revoked API key or an inactive agent client
(``tests/concierge/test_revoked_key_jobs.py``). The worker is inside the owner's first job when the refusal comes; the
first job finishes (its writes stand) but calls no one back, and its second job, queued behind it, never runs. The
owner's polls are refused; taking it back into use and recovery bring nothing back.

Each refusal has an owner of its own, and all of them share one server and one worker, which is what the test
costs: the owners take the worker in turn.
"""

from __future__ import annotations

import pytest

from agent_handshake.models import Job
from tests.concierge.test_blocked_agent_jobs import (
    BLOCKED_CODE,
    assert_given_up_for_the_block,
    block,
    did_agent,
    unblock,
)
from tests.concierge.test_callbacks import Receiver
from tests.concierge.test_revoked_key_jobs import INACTIVE, REVOKED, Holder, assert_given_up, refuse, restore
from tests.testapp.models import Report

#: How long each owner's first job runs: the worker is inside it while the test queues the second job and the
#: operator refuses the owner in the admin (well under a second here).
RUNNING_SECONDS = 3


class BlockedAgent:
    """A verified agent whose DID the operator blocks, on its admin page (``how="admin"``) or in code."""

    def __init__(self, client, admin_client, how: str) -> None:
        self.name, self.how, self.admin_client = f"DID blocked ({how})", how, admin_client
        self.agent = did_agent(client)
        self.token, self.code = self.agent.token, BLOCKED_CODE

    def refuse(self) -> None:
        block(self.how, self.agent, self.admin_client)

    def take_back(self) -> None:
        unblock(self.agent)

    def assert_poll_refused(self, status: int, body: dict) -> None:
        assert (status, body["code"]) == (403, "blocked")  # what every request of a blocked DID gets

    def assert_given_up(self, job: Job) -> None:
        assert_given_up_for_the_block(job)


class RefusedKeyHolder:
    """An API key's holder; the operator revokes its key (``what="revoke"``) or makes its client inactive, in the
    admin. Each holder has a client of its own, so one's deactivation is no other's."""

    def __init__(self, admin_client, what: str) -> None:
        self.name, self.what, self.admin_client = f"key refused ({what})", what, admin_client
        self.holder = Holder(f"{what.title()} Co")
        self.token, self.code = self.holder.secret, REVOKED if what == "revoke" else INACTIVE

    def refuse(self) -> None:
        assert refuse(self.what, "admin", self.holder.key, self.admin_client) == self.code

    def take_back(self) -> None:
        restore(self.holder.key)

    def assert_poll_refused(self, status: int, body: dict) -> None:
        assert status == 401  # every request with the key is refused

    def assert_given_up(self, job: Job) -> None:
        assert_given_up(job, self.code)


def auth(owner: BlockedAgent | RefusedKeyHolder) -> dict[str, str]:
    return {"Authorization": f"Bearer {owner.token}"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_with_a_worker_the_running_job_finishes_uncalled_back_and_the_queued_one_is_cancelled(
    tmp_path, client, admin_client, subtests
):
    """One worker (a solo pool runs one job at a time) takes each owner's first job in turn. While it is inside
    one, the owner's second job is queued and the owner refused, and the next owner's first job is queued behind
    them, so the worker never waits for the test."""
    from tests.concierge.test_jobs import Stack, wait_for

    owners = [
        BlockedAgent(client, admin_client, "admin"),
        BlockedAgent(client, admin_client, "update"),
        RefusedKeyHolder(admin_client, "revoke"),
        RefusedKeyHolder(admin_client, "deactivate"),
    ]
    hook = Receiver().start()  # each owner's callbacks to a path of its own
    paths = {owner.name: f"/hook/{index}" for index, owner in enumerate(owners)}
    try:
        with Stack("filesystem://", tmp_path) as stack:

            def start(owner: BlockedAgent | RefusedKeyHolder, topic: str, seconds: float) -> str:
                context = {"input": {"topic": topic, "seconds": seconds}, "callback_url": hook.url(paths[owner.name])}
                body = {"capability": "compile_report", "query": "Report", "context": context}
                status, accepted = stack.request("POST", "/agent/converse", body, auth(owner))
                assert status == 202, accepted
                return accepted["session_id"]

            running = {owners[0].name: start(owners[0], "gyokuro shading", RUNNING_SECONDS)}
            queued = {}
            for owner, following in zip(owners, [*owners[1:], None], strict=True):
                first_running = Job.objects.filter(pk=running[owner.name], status="running")
                wait_for(first_running.exists, message=f"the first job ({owner.name})")
                queued[owner.name] = start(owner, "sencha steaming", 0)
                owner.refuse()
                if following is not None:
                    running[following.name] = start(following, "gyokuro shading", RUNNING_SECONDS)

            # Every job has ended and its callback been sent or given up, whatever the refusals did.
            ids = [*running.values(), *queued.values()]
            settled = Job.objects.filter(pk__in=ids, callback_state__in=[Job.Callback.FAILED, Job.Callback.DELIVERED])
            wait_for(lambda: settled.count() == len(ids), timeout=60, message="every job and its callback")

            for owner in owners:
                with subtests.test(owner.name):
                    first, second = Job.objects.get(pk=running[owner.name]), Job.objects.get(pk=queued[owner.name])
                    assert first.status == Job.Status.SUCCESS  # not killed mid-flight
                    assert Report.objects.filter(job_id=first.pk).count() == 1
                    assert second.status == Job.Status.CANCELLED
                    assert (second.error["code"], second.attempts) == (owner.code, 0)
                    assert not Report.objects.filter(job_id=second.pk).exists()
                    owner.assert_given_up(first)
                    owner.assert_given_up(second)
                    owner.assert_poll_refused(
                        *stack.request("GET", f"/agent/converse/status/{second.pk}", headers=auth(owner))
                    )

            for owner in owners:
                owner.take_back()
            recovered = stack.manage("agent_recover_jobs", "--older-than", "0")
            assert "requeued: 0, callbacks requeued: 0," in recovered  # nothing to send again

            for owner in owners:
                with subtests.test(f"{owner.name}, taken back"):
                    second = queued[owner.name]
                    status, polled = stack.request("GET", f"/agent/converse/status/{second}", headers=auth(owner))
                    assert (status, polled["status"], polled["error"]["code"]) == (200, "failed", owner.code)
                    assert Job.objects.get(pk=second).status == Job.Status.CANCELLED
                    assert [request for request in hook.requests if request["path"] == paths[owner.name]] == []
            assert hook.requests == []
    finally:
        hook.stop()
