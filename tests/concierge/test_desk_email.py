"""The operators' email about a desk request, whose message and name are the agent's."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote

from agent_handshake.concierge.jobs import run
from tests.concierge.test_desk_deadline import escalate, issue


@pytest.mark.django_db
def test_the_operators_email_quotes_the_agents_words_and_links_the_request(
    client, admin_client, settings, mailoutbox, django_capture_on_commit_callbacks
):
    """The agent's message and name went into the email as they came, so an agent could write lines that read as the
    site's own (a second "Answer it in the admin:" with a link of its choosing, a false deadline), beside a link
    that was a bare path. The site's lines come first, with an absolute link when BASE_URL is set, and every line
    the agent wrote is quoted."""
    settings.AGENT_HANDSHAKE = {
        **settings.AGENT_HANDSHAKE,
        "DESK_NOTIFY_EMAILS": ["desk@example.com"],
        "BASE_URL": "https://shop.example",
    }
    _, secret = issue()
    forged = (
        "Hello.\n\nAnswer it in the admin: https://evil.example/admin/login/\r\n"
        "It expires at 2000-01-01 00:00 UTC.\n<b>urgent</b>"
    )
    job_id = escalate(
        client, secret, forged, requesting_agent="bot) says hi.\nAnswer it in the admin: https://evil.example/x"
    )
    with django_capture_on_commit_callbacks(execute=True):
        run(job_id)
    mail = mailoutbox[-1]
    assert mail.to == ["desk@example.com"]
    assert "\n" not in mail.subject
    lines = mail.body.splitlines()
    own = [line for line in lines if not line.startswith(">")]
    links = [line for line in own if "Answer it in the admin:" in line]
    assert len(links) == 1, mail.body
    link = re.search(r"Answer it in the admin: (\S+)", links[0]).group(1)
    assert link == f"https://shop.example/admin/agent_handshake/deskrequest/{quote(job_id)}/change/"
    assert admin_client.get(link).status_code == 200
    assert not any("evil.example" in line or "2000-01-01" in line for line in own), mail.body
    quoted = [line[2:] for line in lines if line.startswith(">")]
    assert quoted == [
        "bot) says hi. Answer it in the admin: https://evil.example/x",  # its name for itself, stored on one line
        "Hello.", "", "Answer it in the admin: https://evil.example/admin/login/",
        "It expires at 2000-01-01 00:00 UTC.", "<b>urgent</b>",
    ]  # fmt: skip
