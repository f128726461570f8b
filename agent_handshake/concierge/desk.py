"""The human desk (AHP §5.3 "escalate to a human"): requests that a person answers in the Django admin.

A site offers it with one call in its ``agents.py``::

    from agent_handshake.concierge import desk

    desk.register_escalation()  # "escalate_to_human", an async capability

The job waits (``pending`` to the agent, "waiting for an operator" in the admin), operators are emailed
(``DESK_NOTIFY_EMAILS``, else the project's ``MANAGERS``), and the answer an operator saves in the admin's
"Human desk" completes the job, which then reaches the agent by poll and by callback. A request no one answers
within ``DESK_TIMEOUT_SECONDS`` expires.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from django.conf import settings
from django.contrib.admin.utils import quote
from django.core.mail import mail_managers, send_mail
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.text import Truncator

from ..conf import app_settings
from ..models import Job
from .invocation import Deferred, Invocation, Outcome, capability

logger = logging.getLogger(__name__)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["message"],
    "additionalProperties": False,
    "properties": {
        "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What the person needs."},
        "reply_to": {"type": "string", "format": "email", "description": "An email address for a direct reply."},
    },
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer", "answered_by"],
    "additionalProperties": False,
    "properties": {
        "answer": {"type": "string", "minLength": 1},
        "answered_by": {"type": "string"},
    },
}


def to_operator(invocation: Invocation) -> Deferred:
    """The handler of an escalation: park the job on the desk until an operator answers."""
    return Deferred(
        progress="Waiting for a human operator",
        expires_in=app_settings.DESK_TIMEOUT_SECONDS,
        eta_seconds=app_settings.DESK_TIMEOUT_SECONDS,
        needs_operator=True,
    )


def query_as_message(query: str) -> dict[str, Any]:
    """Free text is the message itself."""
    return {"message": query}


def register_escalation(
    name: str = "escalate_to_human",
    description: str = "Pass a question or request to a person at the site; the answer arrives by poll or callback.",
    scope: str | None = None,
    input_schema: dict[str, Any] | None = None,
    intent: str = "Talk to a person",
    examples: tuple[str, ...] = ("I'd like to speak to someone", "Can a person help me with a custom order?"),
) -> None:
    capability(
        name,
        description=description,
        intent=intent,
        examples=examples,
        notes=("A person answers; the answer arrives later, by polling or a callback.",),
        action_type="async",
        input_schema=input_schema or INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
        scope=scope,
        extract=query_as_message,
        eta_seconds=app_settings.DESK_TIMEOUT_SECONDS,
    )(to_operator)


def operator_outcome(answer: str, operator: str) -> Outcome:
    return Outcome({"answer": answer, "answered_by": operator}, answer=answer)


def message_text(job: Job, limit: int | None = None) -> str:
    """What the agent asked, as text: the input's ``message``, else the query; cut to ``limit`` characters (with
    an ellipsis) when given.

    A site's own ``input_schema`` may make ``message`` any JSON value (an object, a list, a number): it is shown as
    JSON, never as a Python repr, so operators read what the agent sent.
    """
    message = job.input.get("message") if isinstance(job.input, dict) else None
    if message is None or message == "":
        text = job.query
    else:
        text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
    return text if limit is None else Truncator(text).chars(limit)


def quoted(text: str) -> str:
    """``text`` as an email quotes it, every line after "> ": whatever it says, it cannot pass for the site's own
    lines. Split wherever a reader might see a line end (``str.splitlines``: CR, LF, VT, FF, NEL, U+2028...)."""
    return "\n".join(f"> {line}" if line else ">" for line in (text.splitlines() or [""]))


def notify_operators(job_id: str) -> bool:
    """Email the operators about a request on the desk, if that is still owed; whether it was sent now.

    It is owed from the commit that put the request on the desk (:func:`~.jobs._defer` sets the job's
    ``recover_after``) until it is sent, and only while the request waits. The send is claimed first, in a
    transaction of its own: ``recover_after`` moves ``JOB_RECOVERY_SECONDS`` on (or stays later, where the recovery's
    doubling wait put it), so neither the recovery (:func:`~.recovery.recover`, for a worker that died first) nor
    another worker sends it meanwhile. The email is then sent with the row free: a slow or hung mail server (Django's
    ``EMAIL_TIMEOUT`` is None by default) holds up neither the agent's cancel nor an operator's answer. Sent, the debt
    is cleared; a failure is logged and leaves it owed, for the recovery once the claim runs out. A send outlasting
    the claim may be made twice; none is lost.

    The site's own lines (the admin link, the deadline) come first; what the agent wrote (its name for itself, its
    message) follows, quoted, so a message cannot add lines that read as the site's, such as another link.
    """
    claim = timezone.now() + datetime.timedelta(seconds=app_settings.JOB_RECOVERY_SECONDS)
    with transaction.atomic():
        job = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(pk=job_id, status=Job.Status.WAITING, needs_operator=True, recover_after__isnull=False)
            .first()
        )
        if job is None:  # sent already, being sent elsewhere, or the request is over
            return False
        claimed = max(job.recover_after, claim)
        Job.objects.filter(pk=job.pk).update(recover_after=claimed)
    if not send_notification(job):
        return False
    # Cleared only if it is still this claim's (a recovery that took over once it ran out owns it then).
    Job.objects.filter(pk=job.pk, recover_after=claimed).update(recoveries=0, recover_after=None)
    return True


def send_notification(job: Job) -> bool:
    """The operators' email about ``job``; whether it went (a failure is logged)."""
    try:
        # Quoted as the admin's own links are: an id holding "_" and two hex digits would be read as a character.
        path = reverse("admin:agent_handshake_deskrequest_change", args=[quote(job.pk)])
    except NoReverseMatch:
        path = ""
    subject = f"Agent request on the desk: {job.capability}"
    body = f"A visiting agent left a request on the human desk ({job.capability}).\n\n"
    if path:
        body += f"Answer it in the admin: {app_settings.BASE_URL.rstrip('/')}{path}\n"
    if job.expires_at:
        body += f"It expires at {job.expires_at:%Y-%m-%d %H:%M %Z}.\n"
    body += "\nWhat the agent sent follows, quoted: its words, not the site's.\n\n"
    if job.requesting_agent:
        body += f"Its name for itself:\n{quoted(job.requesting_agent)}\n\n"
    body += f"Its message:\n{quoted(message_text(job))}\n"
    try:
        recipients = list(app_settings.DESK_NOTIFY_EMAILS)
        if recipients:
            send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
        else:
            mail_managers(subject, body)
    except Exception:
        logger.exception("Could not email the operators about job %s; the recovery will try again", job.pk)
        return False
    return True
