"""MODE3 work: asynchronous jobs, cancellations, the human desk, and idempotency records."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .conversations import _session_id
from .identity import ApiKey
from .retention import Forgettable


class Job(models.Model):
    """One invocation of an ``async`` capability (AHP §6.4, §9), from acceptance to its final state.

    The row is the job: the Celery message only says "run job X", so a lost message or a killed worker loses
    nothing (``recover_jobs`` sends it again), and the row lock held while the job runs keeps two workers from
    both finishing it.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        WAITING = "waiting", _("waiting for an operator")
        SUCCESS = "success", _("success")
        FAILED = "failed", _("failed")
        EXPIRED = "expired", _("expired")
        CANCELLED = "cancelled", _("cancelled")

    class Callback(models.TextChoices):
        NONE = "", _("no callback")
        PENDING = "pending", _("to deliver")
        DELIVERED = "delivered", _("delivered")
        FAILED = "failed", _("gave up")

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.WAITING)
    FINAL = (Status.SUCCESS, Status.FAILED, Status.EXPIRED, Status.CANCELLED)

    id = models.CharField(primary_key=True, max_length=64, default=_session_id, editable=False)
    capability = models.CharField(_("capability"), max_length=64)
    api_key = models.ForeignKey(ApiKey, null=True, on_delete=models.SET_NULL, related_name="jobs")
    requesting_agent = models.CharField(_("requesting agent"), max_length=128, blank=True)
    query = models.TextField(_("query"), blank=True)
    input = models.JSONField(_("input"), default=dict, blank=True)
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.CharField(_("progress"), max_length=255, blank=True)
    #: The negotiated response type (§6.6), and the type it fell back from.
    content_type = models.CharField(max_length=100, default="text/answer")
    fallback_from = models.CharField(max_length=100, blank=True)
    eta_seconds = models.PositiveIntegerField(null=True, blank=True)
    #: The front door that accepted it ("ahp", "nlweb"...): it renders the job's callback.
    protocol = models.CharField(max_length=16, default="ahp", editable=False)
    #: A successful job's outcome: ``{"data", "answer", "side_effects"}`` (each front door renders it).
    result = models.JSONField(null=True, blank=True)
    #: {"code", "message"} of a failed job.
    error = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    needs_operator = models.BooleanField(_("for the human desk"), default=False)
    operator_answer = models.TextField(_("operator's answer"), blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True)

    callback_url = models.CharField(_("callback URL"), max_length=2048, blank=True)
    callback_state = models.CharField(
        _("callback"), max_length=10, choices=Callback.choices, default=Callback.NONE, blank=True
    )
    callback_attempts = models.PositiveIntegerField(default=0)
    callback_last_status = models.PositiveIntegerField(null=True, blank=True)
    callback_last_error = models.CharField(max_length=255, blank=True)
    callback_next_attempt_at = models.DateTimeField(null=True, blank=True)
    callback_delivered_at = models.DateTimeField(null=True, blank=True)
    #: How often ``recover_jobs`` has sent the job's (or its callback's) message again since one was last taken
    #: up, and when it may next do so: the wait doubles each time, so a backlog is not multiplied. On a desk
    #: request waiting for an operator, ``recover_after`` set means the operators' email is still owed (and when
    #: the recovery may send it: ``concierge.desk.notify_operators``).
    recoveries = models.PositiveIntegerField(default=0, editable=False)
    recover_after = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("agent job")
        verbose_name_plural = _("agent jobs")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "updated_at"], name="agent_job_status_idx"),
            models.Index(fields=["callback_state", "callback_next_attempt_at"], name="agent_job_callback_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.capability} · {self.id}"

    @property
    def public_status(self) -> str:
        """The §9.2 status: queued, running and waiting are all ``pending`` to the agent; a cancelled job
        ``failed`` (with the error code ``cancelled``)."""
        if self.status == self.Status.CANCELLED:
            return "failed"
        return "pending" if self.status in self.ACTIVE else self.status


class CancelRequest(models.Model):
    """A caller's request to stop a running job.

    Its own table, with no foreign key: the worker running the job holds the job's row lock for the whole run,
    and writing the job row (or a row that references it) would wait for the job to end. The worker reads this
    before it commits the job's result, and discards the result if it finds it.
    """

    job_id = models.CharField(primary_key=True, max_length=64)
    requested_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.job_id


class DeskRequest(Job):
    """The human desk: jobs of escalation capabilities, which an operator answers in the admin."""

    class Meta:
        proxy = True
        verbose_name = _("human desk request")
        verbose_name_plural = _("human desk")


class IdempotencyRecord(Forgettable):
    """The first response to a request sent with an ``Idempotency-Key`` header, per API key."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveIntegerField()
    body = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "key"], name="agent_idempotency_unique")]

    def __str__(self) -> str:
        return self.key
