"""Agent traffic insights: one row per agent request (raw, kept for ``INSIGHTS_RETENTION_DAYS``), the daily
aggregates kept after the raw rows are purged, and the content gaps (questions nothing on the site answers)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

from .content import Document

#: Upper bounds (milliseconds) of the latency histogram's buckets; the last bucket holds everything slower.
LATENCY_BUCKETS_MS = (5, 10, 20, 35, 50, 75, 100, 150, 250, 400, 600, 1000, 1500, 2500, 4000, 6000, 10000, 30000)


class Outcome(models.TextChoices):
    SUCCESS = "success", _("success")
    CLARIFICATION = "clarification", _("clarification")
    NO_ANSWER = "no_answer", _("no answer")
    REFUSED = "refused", _("refused")
    RATE_LIMITED = "rate_limited", _("rate limited")
    ERROR = "error", _("error")


class AgentKind(models.TextChoices):
    VERIFIED = "did", _("verified DID")
    KEY = "key", _("API key")
    ANONYMOUS = "anonymous", _("anonymous")


class AgentRequest(models.Model):
    """One request an agent made at a front door, written in bulk off the request path."""

    at = models.DateTimeField(_("time"), db_index=True)
    protocol = models.CharField(_("protocol"), max_length=24)
    #: The capability (or MCP tool, IntentWeb intent, schema scenario) the request used; empty when none.
    capability = models.CharField(_("capability"), max_length=64, blank=True)
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    status = models.PositiveSmallIntegerField(_("HTTP status"))
    latency_ms = models.PositiveIntegerField(_("latency (ms)"))
    tokens = models.PositiveIntegerField(_("model tokens"), default=0)
    cached = models.BooleanField(_("from the answer cache"), default=False)
    #: The best retrieval match was under the "weak" line: answered, but maybe not well (a content gap candidate).
    weak = models.BooleanField(_("weak match"), default=False)
    #: The cited documents (``Document`` primary keys), in the order the answer cited them.
    sources = ArrayField(models.BigIntegerField(), default=list, blank=True)
    agent_kind = models.CharField(_("agent kind"), max_length=16, choices=AgentKind.choices)
    #: Who asked: the verified DID, the API key's client name, or the declared ``requesting_agent`` and the
    #: anonymous sender's network ("my-bot @ 203.0.113.0/24"). Untrusted text: escaped wherever it is shown.
    agent = models.CharField(_("agent"), max_length=200)
    #: Only with ``INSIGHTS_RECORD_QUESTIONS``, redacted before storage (emails, phone numbers, digit runs).
    question = models.TextField(_("question"), blank=True)
    #: The content gap the question was grouped into (no-answer and weak questions only, once clustered).
    gap = models.ForeignKey("ContentGap", null=True, blank=True, on_delete=models.SET_NULL, related_name="requests")
    #: When the gap clustering took this row (None: not yet; rows it cannot use are marked too).
    clustered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("agent request")
        verbose_name_plural = _("agent requests")
        indexes = [models.Index(fields=["agent", "at"], name="ah_agentrequest_agent_at")]
        permissions = [("view_insights", _("Can view agent traffic insights"))]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.protocol} {self.capability or '-'} {self.outcome}"


class DailyTraffic(models.Model):
    """Requests per day, protocol, capability, outcome and agent: what is kept after the raw rows are purged."""

    day = models.DateField(_("day"))
    protocol = models.CharField(_("protocol"), max_length=24)
    capability = models.CharField(_("capability"), max_length=64, blank=True)
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    agent_kind = models.CharField(_("agent kind"), max_length=16, choices=AgentKind.choices)
    agent = models.CharField(_("agent"), max_length=200)
    requests = models.PositiveIntegerField(_("requests"))
    tokens = models.BigIntegerField(_("model tokens"), default=0)
    cached = models.PositiveIntegerField(_("from the answer cache"), default=0)
    #: Request counts per :data:`LATENCY_BUCKETS_MS` bucket (one more for slower): percentiles over any range.
    latency_histogram = ArrayField(models.PositiveIntegerField(), size=len(LATENCY_BUCKETS_MS) + 1)

    class Meta:
        verbose_name = _("daily traffic")
        verbose_name_plural = _("daily traffic")
        constraints = [
            models.UniqueConstraint(
                fields=["day", "protocol", "capability", "outcome", "agent_kind", "agent"], name="ah_dailytraffic_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.protocol} {self.capability or '-'} {self.outcome}: {self.requests}"


class DailyCitation(models.Model):
    """How often a document was cited in answers on a day."""

    day = models.DateField(_("day"))
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    citations = models.PositiveIntegerField(_("citations"))

    class Meta:
        verbose_name = _("daily citations")
        verbose_name_plural = _("daily citations")
        constraints = [models.UniqueConstraint(fields=["day", "document"], name="ah_dailycitation_key")]

    def __str__(self) -> str:
        return f"{self.day} document {self.document_id}: {self.citations}"


class ContentGap(models.Model):
    """Questions agents asked that nothing on the site answers, grouped by meaning: content to write next."""

    class Status(models.TextChoices):
        OPEN = "open", _("open")
        ANSWERED = "answered", _("answered (content written)")
        DISMISSED = "dismissed", _("dismissed")

    #: The question nearest the group's centre (redacted when recorded), to name the group.
    label = models.TextField(_("label"))
    # The dimension belongs to the embedding model in use (see EmbeddingIndex).
    centroid = VectorField(null=True)
    #: The embedding model of ``centroid``: after the site changes models, the centroid is computed again from
    #: the examples (``insights/gaps.py``).
    model_id = models.CharField(max_length=200, blank=True)
    count = models.PositiveIntegerField(_("questions"), default=0)
    #: A few redacted questions of the group, most recent last.
    examples = models.JSONField(_("examples"), default=list, blank=True)
    first_seen = models.DateTimeField(_("first asked"))
    last_seen = models.DateTimeField(_("last asked"))
    nearest_document = models.ForeignKey(
        Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("nearest page")
    )
    nearest_score = models.FloatField(_("nearest page's similarity"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.OPEN)

    class Meta:
        verbose_name = _("content gap")
        verbose_name_plural = _("content gaps")

    def __str__(self) -> str:
        return self.label[:80]
