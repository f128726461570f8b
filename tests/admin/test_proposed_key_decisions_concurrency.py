"""Two editors deciding on one proposed key at the same instant, on two real database connections.

The test's own connection holds the proposal's row (``FOR UPDATE``) while both admin actions start, so each has
read the key as pending before either writes; it lets go once both are waiting for the row.
"""

from __future__ import annotations

import threading

import pytest
from django.db import transaction
from django.test import Client

from agent_handshake.models import ProposedField
from tests.content.test_indexing_concurrency import wait_for, worker
from tests.schema_templates.test_schema_templates import echo, editor  # noqa: F401  (echo is a fixture)

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "/admin/agent_handshake/proposedfield/"


def test_the_second_of_two_simultaneous_decisions_sees_the_first(echo):  # noqa: F811
    proposal = ProposedField.objects.create(capability="plan_picnic", name="window_seat", description="d",
                                            fragments=6, sources=3)  # fmt: skip
    editors = {}
    for action in ("reject", "approve"):
        editors[action] = Client()
        editors[action].force_login(editor("view_proposedfield", "change_proposedfield", name=f"{action}er"))
    pages: dict[str, str] = {}
    errors: list[BaseException] = []

    def decide(action: str) -> None:
        response = editors[action].post(CHANGELIST, {"action": action, "_selected_action": [proposal.pk]},
                                        follow=True)  # fmt: skip
        assert response.status_code == 200
        pages[action] = response.content.decode()

    threads = [threading.Thread(target=worker(lambda action=action: decide(action), errors)) for action in editors]
    with transaction.atomic():
        list(ProposedField.objects.select_for_update().filter(pk=proposal.pk))  # another decision is being saved
        for thread in threads:
            thread.start()
        wait_for(2)
    for thread in threads:
        thread.join(30)

    assert errors == []
    proposal.refresh_from_db()
    winner = "reject" if proposal.status == ProposedField.Status.REJECTED else "approve"
    loser = "approve" if winner == "reject" else "reject"
    assert proposal.status in (ProposedField.Status.REJECTED, ProposedField.Status.EXPERIMENTAL)
    assert proposal.decided_by.username == f"{winner}er"
    # The winner was told it was done; the other editor that it was not, and why (what the key now is).
    done = {"reject": "rejected", "approve": "approved"}
    assert f"{done[winner].capitalize()} 1 proposed key." in pages[winner]
    assert f"{done[loser].capitalize()} 1 proposed key." not in pages[loser]
    assert f"Not {done[loser]}: window_seat is {proposal.get_status_display()}." in pages[loser]
