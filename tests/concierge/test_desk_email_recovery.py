"""The operators' email about a desk request is owed until it is sent. It was sent by the worker after its commit, and
by nothing else: a worker that died between the request's commit and the email (or a mail server that refused it)
left the request on the desk with no one told. The recovery sweep now sends what was never sent, once: never a second
time, whether the first send came from the worker or from an earlier sweep."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from django.contrib.admin.utils import quote
from django.core.mail.backends.base import BaseEmailBackend
from django.db import connection
from django.utils import timezone

from agent_handshake.concierge import jobs, recovery
from agent_handshake.conf import app_settings
from agent_handshake.models import Job
from tests.concierge.test_desk_deadline import escalate, issue

pytestmark = pytest.mark.django_db

LOCMEM = "django.core.mail.backends.locmem.EmailBackend"


class RefusingBackend(BaseEmailBackend):
    """A mail server that is down."""

    def send_messages(self, email_messages):
        raise ConnectionRefusedError("the mail server is down")


@pytest.fixture
def desk(settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DESK_NOTIFY_EMAILS": ["desk@example.com"]}
    settings.EMAIL_BACKEND = LOCMEM


def sweep(django_capture_on_commit_callbacks, after: float) -> dict[str, int]:
    """The recovery sweep, ``after`` seconds from now, its on-commit messages run."""
    later = timezone.now() + datetime.timedelta(seconds=after)
    with django_capture_on_commit_callbacks(execute=True):
        return recovery.recover(later)


def to_desk(django_capture_on_commit_callbacks, job_id: str, *, worker_dies: bool) -> list:
    """A worker runs the job onto the desk; ``worker_dies``: it dies once its transaction committed, before the
    hooks that follow the commit (the email) ran. Returns those hooks."""
    with django_capture_on_commit_callbacks(execute=not worker_dies) as hooks:
        assert jobs.run(job_id) == Job.Status.WAITING
    return hooks


def desk_emails(mailoutbox, job_id: str) -> list:
    """The emails about this request (its admin link names it)."""
    return [mail for mail in mailoutbox if f"/{quote(job_id)}/change/" in mail.body]


def test_the_email_a_dead_worker_never_sent_is_sent_by_the_recovery_once(
    client, desk, mailoutbox, django_capture_on_commit_callbacks
):
    _, secret = issue()
    job_id = escalate(client, secret, "Can you blend 2 kg of a smoky tea for our cafe?")
    lost = to_desk(django_capture_on_commit_callbacks, job_id, worker_dies=True)
    assert desk_emails(mailoutbox, job_id) == []
    interval = app_settings.JOB_RECOVERY_SECONDS
    sweep(django_capture_on_commit_callbacks, interval / 2)  # too soon: the worker may still be sending it
    assert desk_emails(mailoutbox, job_id) == []
    sweep(django_capture_on_commit_callbacks, interval + 1)
    sent = desk_emails(mailoutbox, job_id)
    assert len(sent) == 1, [mail.body for mail in mailoutbox]
    assert sent[0].to == ["desk@example.com"]
    assert "> Can you blend 2 kg of a smoky tea for our cafe?" in sent[0].body
    # Never twice: later sweeps, and the dead worker's own hook had it run after all.
    for after in (2 * interval + 1, 10 * interval, 100 * interval):
        sweep(django_capture_on_commit_callbacks, after)
    for hook in lost:
        hook()
    assert len(desk_emails(mailoutbox, job_id)) == 1
    assert Job.objects.get(pk=job_id).status == Job.Status.WAITING  # still on the desk, for an operator


def test_the_email_the_worker_sent_is_not_sent_again(client, desk, mailoutbox, django_capture_on_commit_callbacks):
    _, secret = issue()
    job_id = escalate(client, secret, "A person, please.")
    to_desk(django_capture_on_commit_callbacks, job_id, worker_dies=False)
    assert len(desk_emails(mailoutbox, job_id)) == 1
    for after in (1, 31, 100, 10_000):
        sweep(django_capture_on_commit_callbacks, app_settings.JOB_RECOVERY_SECONDS + after)
    assert len(desk_emails(mailoutbox, job_id)) == 1


def test_an_email_the_mail_server_refused_is_sent_again_later(
    client, desk, settings, mailoutbox, django_capture_on_commit_callbacks
):
    _, secret = issue()
    job_id = escalate(client, secret, "Is the shop open on Sunday?")
    settings.EMAIL_BACKEND = f"{__name__}.RefusingBackend"
    to_desk(django_capture_on_commit_callbacks, job_id, worker_dies=False)  # logged, not the job's failure
    interval = app_settings.JOB_RECOVERY_SECONDS
    sweep(django_capture_on_commit_callbacks, interval + 1)  # still down
    assert desk_emails(mailoutbox, job_id) == []
    settings.EMAIL_BACKEND = LOCMEM
    sweep(django_capture_on_commit_callbacks, 200 * interval)
    assert len(desk_emails(mailoutbox, job_id)) == 1
    sweep(django_capture_on_commit_callbacks, 400 * interval)
    assert len(desk_emails(mailoutbox, job_id)) == 1


def test_a_request_that_ended_before_its_email_was_sent_is_not_mailed(
    client, desk, mailoutbox, django_capture_on_commit_callbacks
):
    _, secret = issue()
    job_id = escalate(client, secret, "Never mind.")
    to_desk(django_capture_on_commit_callbacks, job_id, worker_dies=True)
    assert jobs.cancel(job_id).status == Job.Status.CANCELLED
    sweep(django_capture_on_commit_callbacks, app_settings.JOB_RECOVERY_SECONDS + 1)
    assert desk_emails(mailoutbox, job_id) == []


class SlowBackend(BaseEmailBackend):
    """A mail server that takes its time: holds each send until the test lets it go."""

    sending = threading.Event()
    release = threading.Event()

    def send_messages(self, email_messages):
        SlowBackend.sending.set()
        SlowBackend.release.wait(30)
        return len(email_messages)


@pytest.mark.django_db(transaction=True)
def test_the_agent_can_cancel_while_the_operators_email_is_being_sent(client, settings):
    """The email went out with the request's row locked, so while a slow (or hung: Django's ``EMAIL_TIMEOUT`` is
    None by default) mail server took its time, the agent's cancel and an operator's answer waited for it. The
    request is claimed for the send, and the send made with the row free."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DESK_NOTIFY_EMAILS": ["desk@example.com"]}
    settings.EMAIL_BACKEND = f"{__name__}.SlowBackend"
    SlowBackend.sending.clear()
    SlowBackend.release.clear()
    _, secret = issue()
    job_id = escalate(client, secret, "A person, please.")
    ran: dict[str, str] = {}

    def worker_sends():  # the worker: the request onto the desk, committed, then the email (after its commit)
        try:
            ran["status"] = jobs.run(job_id)
        finally:
            connection.close()

    sender = threading.Thread(target=worker_sends)
    sender.start()
    try:
        assert SlowBackend.sending.wait(10), "the email was never sent"
        began = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")
        try:
            assert jobs.cancel(job_id).status == Job.Status.CANCELLED
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
        assert time.monotonic() - began < 3
    finally:
        SlowBackend.release.set()
        sender.join(30)
    assert ran == {"status": Job.Status.WAITING}
    assert Job.objects.get(pk=job_id).status == Job.Status.CANCELLED
