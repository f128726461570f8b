"""A published proposed key's use, as editors read it to promote or retire it: each sender counts once (a caller
repeating one submission inflated ``filled`` and ``failures`` at will), and an editor approving a key whose values
can never reach its capability (``additionalProperties: false``) is told so."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import ProposedField
from tests.schema_templates.test_schema_templates import echo, echoing, editor, post, sender, template  # noqa: F401  (echo is a fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agent_handshake/proposedfield/"


def published_key(capability: str = "plan_picnic", status: str = "experimental") -> ProposedField:
    return ProposedField.objects.create(capability=capability, name="window_seat", description="A window seat.",
                                        status=status, fragments=6, sources=3)  # fmt: skip


def submit(client, capture, schema_id: str, value, secret: str | None = None, **headers) -> int:
    with capture(execute=True):  # as the submission commits
        response, body = post(client, {"schema_id": schema_id, "payload": {"place": "Park", "window_seat": value}},
                              secret, **headers)  # fmt: skip
    assert response.status_code in (200, 400), body
    return response.status_code


def test_a_sender_filling_or_failing_a_key_again_and_again_counts_once(
    client,
    echo,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    proposal = published_key()
    schema_id = template(client, "plan_picnic")["schema_id"]
    capture = django_capture_on_commit_callbacks
    for _ in range(6):  # one anonymous caller, the same submission over and over
        assert submit(client, capture, schema_id, "yes") == 200
        assert submit(client, capture, schema_id, 3) == 400
    proposal.refresh_from_db()
    assert (proposal.filled, proposal.failures) == (1, 1)
    # Each other sender counts: two agent clients, and a caller from another network.
    for secret in (sender("agent a"), sender("agent b")):
        assert submit(client, capture, schema_id, "yes", secret) == 200
        assert submit(client, capture, schema_id, "yes", secret) == 200
    assert submit(client, capture, schema_id, 3, REMOTE_ADDR="203.0.113.9") == 400
    assert submit(client, capture, schema_id, 3, REMOTE_ADDR="203.0.113.10") == 400  # the same /24: one sender
    proposal.refresh_from_db()
    assert (proposal.filled, proposal.failures) == (3, 2)


def test_editors_read_the_counts_as_senders(admin_client, echo):  # noqa: F811
    proposal = published_key()
    ProposedField.objects.filter(pk=proposal.pk).update(filled=7, failures=2)
    listing = admin_client.get(CHANGELIST).content.decode().lower()
    page = admin_client.get(f"{CHANGELIST}{proposal.pk}/change/").content.decode().lower()
    for html in (listing, page):
        assert "senders who filled it" in html
        assert "senders whose value was refused" in html
    assert '<td class="field-senders_filled">7</td>' in listing
    assert '<td class="field-senders_refused">2</td>' in listing


@pytest.fixture
def strict(registries):
    """``reserve_table``, a capability that echoes its input, whose input schema refuses properties it does not
    declare."""
    schema = {
        "type": "object",
        "required": ["place"],
        "additionalProperties": False,
        "properties": {"place": {"type": "string"}},
    }
    return echoing("reserve_table", "Reserve a table.", schema)


def test_approving_a_key_its_capability_never_receives_warns_the_editor(client, strict, echo):  # noqa: F811
    never = published_key("reserve_table", status="pending")
    reaches = published_key("plan_picnic", status="pending")
    client.force_login(editor("view_proposedfield", "change_proposedfield"))
    response = client.post(CHANGELIST, {"action": "approve", "_selected_action": [never.pk, reaches.pk]}, follow=True)
    page = response.content.decode()
    assert "Approved 2 proposed keys" in page
    assert "reserve_table" in page
    assert "additionalProperties" in page
    warning = next(line for line in page.splitlines() if "additionalProperties" in line)
    assert "plan_picnic" not in warning  # plan_picnic's schema lets its values through
    # The warning is true: the value is taken (and counted) but the capability never sees it.
    schema_id = template(client, "reserve_table")["schema_id"]
    body = {"schema_id": schema_id, "payload": {"place": "Park", "window_seat": "yes"}}
    answer = client.post("/schema-templates", json.dumps(body), content_type="application/json").json()
    assert answer["received"] == {"place": "Park"}
    # The key's own page says it too.
    page = client.get(f"{CHANGELIST}{never.pk}/change/").content.decode()
    assert "additionalProperties" in page
    assert "additionalProperties" not in client.get(f"{CHANGELIST}{reaches.pk}/change/").content.decode()
