"""An agent's name for itself (``context.requesting_agent``) is shown to operators on the desk (the admin's human
desk, the operators' email): a job stored it with its invisible characters, so a U+202E before "moc.elgoog" showed
"google.com", as verified agents' and the insights' names did before they were cleaned."""

from __future__ import annotations

import pytest

from agent_handshake.models import Job
from tests.concierge.test_desk_deadline import escalate, issue

pytestmark = pytest.mark.django_db


def test_a_jobs_requesting_agent_is_stored_as_it_shows(client):
    _, secret = issue()
    job_id = escalate(client, secret, "A person, please.", requesting_agent="\u202emoc.elgoog\u200b \x1b[31mbot")
    assert Job.objects.get(pk=job_id).requesting_agent == "moc.elgoog [31mbot"


def test_a_jobs_requesting_agent_keeps_the_joiners_its_words_need(client):
    _, secret = issue()
    name = "\u200cمی\u200cخواهم\u200c \U0001f469\u200d\U0001f4bb"  # the leading and trailing ZWNJ join nothing
    job_id = escalate(client, secret, "A person, please.", requesting_agent=name)
    assert Job.objects.get(pk=job_id).requesting_agent == "می\u200cخواهم \U0001f469\u200d\U0001f4bb"
