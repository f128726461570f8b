from __future__ import annotations

import base64
import re
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

from .conf import app_settings

SIGNAL_NAMES = ("ai_train", "ai_input", "search", "attribution_required")


class SiteProfile(models.Model):
    """The one row that describes the site to agents: name, description, contact, site-wide content signals."""

    name = models.CharField(_("site name"), max_length=128)
    description = models.TextField(
        _("description"), max_length=512, blank=True, help_text=_("One or two sentences for visiting agents.")
    )
    contact_email = models.EmailField(_("contact email"), blank=True)
    contact_url = models.CharField(_("contact page URL"), max_length=500, blank=True)
    contact_phone = models.CharField(_("contact phone"), max_length=64, blank=True)
    postal_address = models.TextField(_("postal address"), blank=True)
    schema_type = models.CharField(
        _("schema.org type"),
        max_length=200,
        blank=True,
        help_text=_("What the site's owner is, as a schema.org type URL: https://schema.org/Store, .../Restaurant."),
    )
    operating_hours = models.TextField(
        _("opening hours"),
        blank=True,
        help_text=_("One line each, a label and the hours: “shop: Tuesday to Saturday, 10:00-17:00”."),
    )

    ai_train = models.BooleanField(_("AI training allowed"), default=False)
    ai_input = models.BooleanField(_("AI input allowed"), default=True, help_text=_("Used as context in answers."))
    search = models.BooleanField(_("AI search indexing allowed"), default=True)
    attribution_required = models.BooleanField(_("attribution required"), default=True)

    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("agent site profile")
        verbose_name_plural = _("agent site profile")

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A singleton: whatever was asked, there is only ever row 1.
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> SiteProfile:
        """The stored profile, or an unsaved one built from the settings' defaults."""
        profile = cls.objects.filter(pk=1).first()
        if profile is None:
            profile = cls(
                pk=1,
                name=app_settings.SITE_NAME,
                description=app_settings.SITE_DESCRIPTION,
                **{name: bool(app_settings.DEFAULT_CONTENT_SIGNALS.get(name)) for name in SIGNAL_NAMES},
            )
        return profile

    def content_signals(self) -> dict[str, bool]:
        return {name: getattr(self, name) for name in SIGNAL_NAMES}

    def hours(self) -> dict[str, str]:
        """:attr:`operating_hours` as {label: hours}; a line without a label is keyed "hours"."""
        found: dict[str, str] = {}
        for line in self.operating_hours.splitlines():
            label, sep, hours = line.partition(":")
            label, hours = (label.strip(), hours.strip()) if sep and hours.strip() else ("hours", line.strip())
            if hours:
                found[label or "hours"] = hours
        return found

    def contact(self) -> dict[str, str]:
        fields = {
            "email": self.contact_email,
            "url": self.contact_url,
            "phone": self.contact_phone,
            "address": self.postal_address,
        }
        return {key: value for key, value in fields.items() if value}


class ContentSignalOverride(models.Model):
    """Content signals for one registered model that differ from the site-wide ones. Empty means inherit."""

    INHERIT_CHOICES = [(None, _("Inherit")), (True, _("Yes")), (False, _("No"))]

    profile = models.ForeignKey(SiteProfile, on_delete=models.CASCADE, related_name="signal_overrides")
    content_type = models.OneToOneField(
        ContentType, on_delete=models.CASCADE, verbose_name=_("content"), related_name="+"
    )
    ai_train = models.BooleanField(_("AI training allowed"), null=True, blank=True, choices=INHERIT_CHOICES)
    ai_input = models.BooleanField(_("AI input allowed"), null=True, blank=True, choices=INHERIT_CHOICES)
    search = models.BooleanField(_("AI search indexing allowed"), null=True, blank=True, choices=INHERIT_CHOICES)
    attribution_required = models.BooleanField(
        _("attribution required"), null=True, blank=True, choices=INHERIT_CHOICES
    )
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("content signal override")
        verbose_name_plural = _("content signal overrides")

    def __str__(self) -> str:
        return str(self.content_type)

    def clean(self) -> None:
        from .registry import content_registry

        model = self.content_type.model_class() if self.content_type_id else None
        if model is not None and not content_registry.is_registered(model):
            raise ValidationError({"content_type": _("Only models registered with agent_handshake have signals.")})

    def apply(self, signals: dict[str, bool]) -> dict[str, bool]:
        """``signals`` with this override's non-empty values put over them."""
        merged = dict(signals)
        for name in SIGNAL_NAMES:
            value = getattr(self, name)
            if value is not None:
                merged[name] = value
        return merged


class Document(models.Model):
    """One registered object as agents see it: its URL, title, markdown and content-type payload.

    Kept in step with the source objects by the signal handlers and ``manage.py agent_reindex``; the
    llms.txt files and the markdown versions are read from here, so serving them costs one indexed query
    (or one streamed cursor) whatever the source models look like.
    """

    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, related_name="+")
    object_id = models.CharField(max_length=64)
    url = models.CharField(max_length=2048)
    #: The URL's path, by which the middleware finds the document of a page ("/blog/some-post/").
    path = models.CharField(max_length=2048, db_index=True)
    title = models.CharField(max_length=500)
    summary = models.TextField(blank=True)
    markdown = models.TextField(blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    schema_type = models.CharField(max_length=100, blank=True)
    ahp_content_type = models.CharField(max_length=100, default="text/answer")
    payload = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    #: The content hash its passages were built from; equal to content_hash once the passages are current.
    indexed_hash = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        verbose_name = _("agent document")
        verbose_name_plural = _("agent documents")
        constraints = [
            models.UniqueConstraint(fields=["content_type", "object_id"], name="agent_handshake_document_object"),
        ]
        indexes = [models.Index(fields=["content_type", "published_at"], name="agent_doc_type_published")]

    def __str__(self) -> str:
        return self.title


class Passage(models.Model):
    """A piece of a document's markdown, with its embedding and full-text vector: the unit of retrieval.

    The filter columns (model, content type, date) are copied from the document so that both the vector and
    the full-text candidate queries filter without a join.
    """

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField()
    heading = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    title = models.CharField(max_length=500)
    model_label = models.CharField(max_length=100)
    ahp_content_type = models.CharField(max_length=100)
    published_at = models.DateTimeField(null=True, blank=True)
    # The dimension belongs to the embedding model in use (see EmbeddingIndex); its HNSW index is created for it.
    embedding = VectorField(null=True)
    search_vector = SearchVectorField(null=True)
    #: How many lexeme occurrences ``search_vector`` holds (title, heading and text): BM25's document length.
    length = models.PositiveIntegerField(null=True, editable=False)

    class Meta:
        verbose_name = _("passage")
        verbose_name_plural = _("passages")
        ordering = ["document", "position"]
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="agent_handshake_passage_position"),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="agent_passage_search_vector"),
            models.Index(fields=["model_label", "published_at"], name="agent_passage_filters"),
        ]

    def __str__(self) -> str:
        return f"{self.title} #{self.position}"


class LexemeStat(models.Model):
    """How many passages contain each full-text lexeme: the document frequencies behind the IDF weights of
    full-text ranking (PostgreSQL's ts_rank has none). Kept in step as passages are written and deleted, and
    rebuilt from ``ts_stat`` at the end of ``agent_reindex``."""

    lexeme = models.CharField(max_length=255, primary_key=True)
    passages = models.IntegerField()

    class Meta:
        verbose_name = _("lexeme statistic")
        verbose_name_plural = _("lexeme statistics")

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.passages}"


class Posting(models.Model):
    """One full-text lexeme of one passage: how often it occurs in the passage's title, heading and text, and the
    passage's length (all its lexeme occurrences, copied so scoring needs no join). The inverted index behind
    BM25 (``retrieval/hybrid.py``): PostgreSQL's ``ts_rank`` has neither IDF nor BM25's length normalisation.
    Written with the passage's full-text vector (``retrieval/index.py``) and deleted with the passage."""

    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.CharField(max_length=255)
    in_title = models.PositiveSmallIntegerField(default=0)
    in_heading = models.PositiveSmallIntegerField(default=0)
    in_text = models.PositiveSmallIntegerField(default=0)
    length = models.PositiveIntegerField()

    class Meta:
        verbose_name = _("posting")
        verbose_name_plural = _("postings")
        constraints = [
            models.UniqueConstraint(fields=["passage", "lexeme"], name="agent_handshake_posting_passage_lexeme"),
        ]
        indexes = [
            # A word's postings with their counts, read without touching the table (BM25 in retrieval/hybrid.py).
            models.Index(
                fields=["lexeme", "passage"],
                include=["in_title", "in_heading", "in_text", "length"],
                name="agent_posting_lexeme",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lexeme} in {self.passage_id}"


class EmbeddingIndex(models.Model):
    """The one embedding model whose vectors the passages hold. A different configured model is refused until
    ``manage.py agent_reindex --rebuild`` re-embeds everything, so vectors of two models are never mixed."""

    model_id = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("embedding index")
        verbose_name_plural = _("embedding index")

    def __str__(self) -> str:
        return f"{self.model_id} ({self.dimensions} dimensions)"


def _session_id() -> str:
    import secrets

    return secrets.token_urlsafe(18)


class ConverseSession(models.Model):
    """A multi-turn exchange with one visiting agent (AHP §6.5)."""

    id = models.CharField(primary_key=True, max_length=64, default=_session_id, editable=False)
    capability = models.CharField(max_length=64)
    requesting_agent = models.CharField(max_length=128, blank=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    #: The API key that started the session: only it may continue it. None: an anonymous session, which only
    #: anonymous requests from ``client_ip``'s network may continue.
    api_key = models.ForeignKey("ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_active_at = models.DateTimeField(db_index=True)
    #: [{"query", "standalone_query", "answer", "sources": [{"title", "url"}], "tokens"}, ...]
    turns = models.JSONField(default=list, blank=True)
    tokens_used = models.PositiveIntegerField(default=0)
    #: The question and options of a clarification the agent has not answered yet.
    pending_clarification = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name = _("converse session")
        verbose_name_plural = _("converse sessions")
        ordering = ["-last_active_at"]

    def __str__(self) -> str:
        return self.id


# --- MODE3: agent clients, API keys, jobs ------------------------------------------------------------------------


class AgentClient(models.Model):
    """A visiting agent (or the organisation running it) that the site has issued credentials to."""

    name = models.CharField(_("name"), max_length=128, unique=True)
    contact_email = models.EmailField(_("contact email"), blank=True)
    description = models.TextField(_("notes"), blank=True)
    is_active = models.BooleanField(_("active"), default=True, help_text=_("Inactive clients' keys are refused."))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("agent client")
        verbose_name_plural = _("agent clients")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiKeyManager(models.Manager["ApiKey"]):
    def issue(
        self,
        client: AgentClient,
        *,
        name: str = "",
        scopes: list[str] | None = None,
        expires_at: Any = None,
        key_id: str | None = None,
        salt: str | None = None,
    ) -> tuple[ApiKey, str]:
        """Create a key and return it with its secret, which is not stored and cannot be shown again.

        ``key_id`` and ``salt`` are random unless given (the demo passes fixed ones so its key is reproducible).
        """
        from . import keys

        key = self.model(
            client=client,
            name=name,
            key_id=key_id or keys.new_key_id(),
            salt=salt or keys.new_salt(),
            scopes=list(scopes if scopes is not None else ["*"]),
            expires_at=expires_at,
        )
        secret = keys.derive_secret(key.key_id, key.salt)
        key.secret_hash = keys.hash_secret(secret)
        key.save()
        return key, secret


class ApiKey(models.Model):
    """A credential of an :class:`AgentClient` (AHP §8.2): ``bearer``, ``api_key`` or ``signed_request``.

    Only a SHA-256 hash of the secret is stored. The secret is derived from ``SECRET_KEY``, the key id and a
    random salt, so the server can recompute it to check request signatures and to sign callbacks, while a copy
    of the database alone reveals no usable secret (see ``agent_handshake/keys.py``).
    """

    client = models.ForeignKey(AgentClient, on_delete=models.CASCADE, related_name="keys", verbose_name=_("client"))
    name = models.CharField(_("name"), max_length=128, blank=True)
    key_id = models.CharField(_("key id"), max_length=32, unique=True, editable=False)
    salt = models.CharField(max_length=64, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(
        _("scopes"), default=list, blank=True, help_text=_('Capability scopes this key may use; "*" for all.')
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True, editable=False)

    objects = ApiKeyManager()

    class Meta:
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.client} · {self.name or self.key_id}"

    def refusal(self, now: Any) -> str | None:
        """Why the key cannot be used now, or None."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        if not self.client.is_active:
            return "client inactive"
        return None

    def allows(self, scope: str | None) -> bool:
        return scope is None or "*" in self.scopes or scope in self.scopes

    def secret(self) -> str | None:
        """The key's secret, recomputed (to check signed requests and sign callbacks); None if it cannot be."""
        from . import keys

        return keys.recover_secret(self.key_id, self.salt, self.secret_hash)


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
    #: up, and when it may next do so: the wait doubles each time, so a backlog is not multiplied.
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


class IdempotencyRecord(models.Model):
    """The first response to a request sent with an ``Idempotency-Key`` header, per API key."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "key"], name="agent_idempotency_unique")]

    def __str__(self) -> str:
        return self.key


class SeenSignature(models.Model):
    """Signatures of signed requests already accepted, kept for the clock-skew window (the replay cache)."""

    signature = models.CharField(max_length=64, primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return self.signature


class Interaction(models.Model):
    """One IntentWeb interaction (``interaction_id``): the capability it was routed to, what has been collected
    for its ``input_schema``, and where it ended. Only the credentials (or, anonymous, the network) that started it
    may continue it."""

    class Status(models.TextChoices):
        CLARIFYING = "clarifying", _("choosing a capability")
        COLLECTING = "collecting", _("collecting information")
        WAITING = "waiting", _("waiting for a job")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")
        CLOSED = "closed", _("closed by the client")

    TERMINAL = (Status.DONE, Status.FAILED, Status.CLOSED)

    interaction_id = models.CharField(max_length=128, unique=True)
    api_key = models.ForeignKey("ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COLLECTING)
    capability = models.CharField(max_length=64, blank=True)
    #: Capability names offered in a clarification_request, best first.
    candidates = models.JSONField(default=list, blank=True)
    collected = models.JSONField(default=dict, blank=True)
    #: The hex SHA-256 of the initial intent (the attribution profile's query_hash); every later message repeats it.
    query_hash = models.CharField(max_length=64)
    #: The first message, kept for routing and for the job that an async capability starts.
    intent = models.TextField(max_length=4096)
    #: The cosine similarity that chose the capability (explicability's confidence); None: chosen by the client.
    confidence = models.FloatField(null=True, blank=True)
    #: The site's intent endpoint as the client reached it: the site's actor_id in its chain entries.
    endpoint = models.CharField(max_length=500)
    job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    external_id = models.CharField(max_length=128, blank=True)
    turns = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        verbose_name = _("IntentWeb interaction")

    def __str__(self) -> str:
        return self.interaction_id

    @property
    def terminal(self) -> bool:
        return self.status in self.TERMINAL


class IntentNonce(models.Model):
    """Attribution nonces already accepted on ``POST /intent``, kept for the clock-skew window (replays)."""

    nonce = models.CharField(max_length=128, primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return self.nonce


def validate_ed25519_public_key(value: str) -> None:
    """32 bytes in base64url (padding optional): the raw form of an Ed25519 public key."""
    text = value.strip()
    try:
        if not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", text):
            raise ValueError
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise ValidationError(_("Not base64url.")) from None
    if len(raw) != 32:
        raise ValidationError(_("An Ed25519 public key is 32 bytes; this is %(n)d."), params={"n": len(raw)})


class TrustedActorKey(models.Model):
    """An Ed25519 public key an operator registered for an IntentWeb actor (an agent or a gateway): chain entries
    that name ``actor_id`` must carry its valid signature."""

    actor_id = models.CharField(_("actor id"), max_length=500, unique=True)
    public_key = models.CharField(
        _("public key"),
        max_length=64,
        validators=[validate_ed25519_public_key],
        help_text=_("The raw 32-byte Ed25519 public key, base64url."),
    )
    label = models.CharField(_("label"), max_length=200, blank=True)
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("trusted IntentWeb actor key")

    def __str__(self) -> str:
        return self.label or self.actor_id


# --- schema templates (draft-zhou-structured-data-schema-interaction) --------------------------------------------


class SchemaTemplate(models.Model):
    """The published schema template of one MODE3 capability (its ``scenario``): the version agents see in its
    ``schema_id``, and the template as last published. Rebuilt whenever what it is made of changes (the capability's
    ``input_schema`` in a deploy, an editor's text, a proposed key's lifecycle), and its version goes up then."""

    scenario = models.CharField(_("scenario"), max_length=64, unique=True)
    version = models.PositiveIntegerField(_("version"), default=1)
    #: SHA-256 of :attr:`published`: a rebuild that changes nothing keeps the version.
    digest = models.CharField(max_length=64, blank=True)
    #: SHA-256 of the capability's declaration it was built from (a deploy that changes it rebuilds on first use).
    source_digest = models.CharField(max_length=64, blank=True)
    #: {"keys": [...], "translations": {language: {key_name: description}}}, see schema_templates.templates.
    published = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("schema template")
        permissions = [
            (
                "change_security_keys",
                _("Can change security-relevant keys of schema templates (identity, payment, access)"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scenario}_v{self.version}"

    @property
    def schema_id(self) -> str:
        return f"{self.scenario}_v{self.version}"


class SchemaKeyText(models.Model):
    """An editor's semantic description of one key of a template, in one language (blank: the default one)."""

    template = models.ForeignKey(SchemaTemplate, on_delete=models.CASCADE, related_name="texts")
    key_name = models.CharField(_("key"), max_length=64)
    language = models.CharField(
        _("language"),
        max_length=35,
        blank=True,
        help_text=_("A BCP 47 tag (fr, de-CH); blank for the default text, which replaces the generated one."),
    )
    semantic_description = models.TextField(_("semantic description"), max_length=2000)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("key description")
        constraints = [
            models.UniqueConstraint(fields=["template", "key_name", "language"], name="agent_schema_key_text_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key_name} ({self.language or 'default'})"


class ProposedField(models.Model):
    """An input field agents keep asking for in free text (the differential semantic pool's mature cluster), and
    its two-phase lifecycle: pending until an editor approves it (experimental), then promoted (stable) or retired.
    An editor may also reject it. ``filled`` and ``failures`` count its use while it is published."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending review")
        EXPERIMENTAL = "experimental", _("experimental")
        STABLE = "stable", _("stable")
        RETIRED = "retired", _("retired")
        REJECTED = "rejected", _("rejected")

    PUBLISHED = (Status.EXPERIMENTAL, Status.STABLE)

    capability = models.CharField(_("capability"), max_length=64, db_index=True)
    name = models.CharField(_("key name"), max_length=64, validators=[RegexValidator(r"^[a-z][a-z0-9_]{0,63}$")])
    value_type = models.CharField(
        _("type"),
        max_length=16,
        choices=[(t, t) for t in ("string", "integer", "number", "boolean")],
        default="string",
    )
    description = models.TextField(_("semantic description"), max_length=2000)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    #: The cluster's mean direction (unit length), which later fragments are compared with.
    centroid = VectorField(null=True, editable=False)
    fragments = models.PositiveIntegerField(_("fragments"), default=0, editable=False)
    sources = models.PositiveIntegerField(_("distinct sources"), default=0, editable=False)
    #: A few of the fragments, for editors only (never sent to agents).
    examples = models.JSONField(default=list, blank=True, editable=False)
    filled = models.PositiveIntegerField(_("times filled"), default=0, editable=False)
    failures = models.PositiveIntegerField(_("validation failures"), default=0, editable=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("proposed input key")
        ordering = ["capability", "-created_at"]

    def __str__(self) -> str:
        return f"{self.capability}.{self.name} ({self.get_status_display()})"


class UnmappedFragment(models.Model):
    """Free text an agent sent beside a capability's structured input because no field could hold it (a schema
    template's ``other`` key): the differential semantic pool. Cleaned before it is stored; embedded and clustered
    off the request path (``concierge.input_pool``)."""

    capability = models.CharField(max_length=64)
    text = models.TextField(max_length=1000)
    #: Who sent it, as a digest (the API key's id, or the client's network): counts distinct sources, names none.
    source = models.CharField(max_length=64)
    embedding = VectorField(null=True)
    proposal = models.ForeignKey(ProposedField, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("unmapped input fragment")
        indexes = [models.Index(fields=["capability", "proposal", "created_at"], name="agent_fragment_pool")]

    def __str__(self) -> str:
        return self.text[:60]


# --- verified agent identity (Agent Semantic Protocol DIDs) -------------------------------------------------------


class VerifiedAgent(models.Model):
    """A visiting agent that proved it holds the Ed25519 key its DID names (``identity.handshake``), with the trust
    it has earned. Its requests are counted, own their sessions and jobs, and are logged as this DID: through
    :attr:`key`, an API key of its own that no one holds (only session credentials stand for it)."""

    did = models.CharField(_("DID"), max_length=100, unique=True)
    public_key = models.CharField(_("public key"), max_length=64, validators=[validate_ed25519_public_key])
    #: What the agent says it is called and can do: hints, shown to operators.
    agent_id = models.CharField(_("agent id (self-declared)"), max_length=200, blank=True)
    capabilities = models.JSONField(_("capabilities (self-declared)"), default=list, blank=True)
    trust = models.FloatField(_("trust"), default=0.5)
    pinned = models.BooleanField(
        _("pinned"), default=False, help_text=_("Keep the trust an operator set: requests no longer change it.")
    )
    blocked = models.BooleanField(_("blocked"), default=False, help_text=_("Every request of this DID gets 403."))
    scopes = models.JSONField(
        _("extra scopes"), default=list, blank=True, help_text=_("Scopes this agent gets beyond its trust tier's.")
    )
    key = models.OneToOneField(ApiKey, on_delete=models.PROTECT, related_name="verified_agent", editable=False)
    created_at = models.DateTimeField(_("first verified"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("last verified"), null=True, blank=True)

    class Meta:
        verbose_name = _("verified agent")
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return self.agent_id or self.did


class TrustEvent(models.Model):
    """One change of a verified agent's trust: the history operators read."""

    agent = models.ForeignKey(VerifiedAgent, on_delete=models.CASCADE, related_name="trust_events")
    delta = models.FloatField()
    trust = models.FloatField(_("trust after"))
    reason = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("trust event")
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.delta:+.2f} ({self.reason})"


class PendingHandshake(models.Model):
    """The first half of a handshake: the agent's key and the challenge the site sent it, until the agent signs it
    (once, before ``expires_at``)."""

    id = models.CharField(primary_key=True, max_length=43, editable=False)
    did = models.CharField(max_length=100)
    public_key = models.CharField(max_length=64)
    agent_id = models.CharField(max_length=200, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    #: The 32 random bytes the agent must sign (base64url).
    challenge = models.CharField(max_length=64)
    #: The agent's own challenge (base64url), kept so a replayed first message is refused.
    agent_challenge = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class AgentSession(models.Model):
    """A short-lived credential a verified agent got from a completed handshake (stored as a SHA-256 hash)."""

    agent = models.ForeignKey(VerifiedAgent, on_delete=models.CASCADE, related_name="sessions")
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("verified agent session")

    def __str__(self) -> str:
        return f"{self.agent} until {self.expires_at:%Y-%m-%d %H:%M}"


class SiteKeyRecord(models.Model):
    """Every public key the site has spoken with: the current one, and the ones rotated away from, which the
    manifests keep announcing so that agents holding the old DID learn the new one."""

    did = models.CharField(max_length=100, unique=True)
    public_key = models.CharField(max_length=64)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("site key")
        ordering = ["-first_seen_at"]

    def __str__(self) -> str:
        return self.did
