"""Conversations: AHP sessions and IntentWeb interactions with their nonces and the actor keys they trust."""

from __future__ import annotations

import secrets

from django.db import models
from django.utils.translation import gettext_lazy as _

from .identity import SpentValue, validate_ed25519_public_key


def _session_id() -> str:
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
    #: [{"query", "standalone_query", "answer", "sources": [{"title", "url"}], "documents": [ids the answer was
    #: drawn from], "tokens", "clarified": {the clarification a turn answered, and the answer: only then}}, ...]
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


class Interaction(models.Model):
    """One IntentWeb interaction (``interaction_id``): the capability it was routed to, what has been collected
    for its ``input_schema``, and where it ended. Only the credentials (or, anonymous, the network) that started it,
    and the actor that sent its intent_request, may continue it."""

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
    #: The fields the site's last information_request asked for, required or optional: a plain answer (not
    #: ``field: value``) fills the one it asked for.
    asked = models.JSONField(default=list, blank=True)
    #: The hex SHA-256 of the initial intent (the attribution profile's query_hash); every later message repeats it.
    query_hash = models.CharField(max_length=64)
    #: The IntentWeb version the intent_request spoke (a 1.x), which the site's callback envelope repeats (§3.3).
    protocol_version = models.CharField(max_length=16, default="1.0")
    #: The actor that sent the intent_request (its chain's first actor_id; "" for an empty chain): only a message
    #: whose chain begins with the same actor continues the interaction. None: started before the site kept it, so
    #: not checked (None and "" mean different things here, hence null on a CharField).
    actor_id = models.CharField(max_length=500, null=True, blank=True, default=None)  # noqa: DJ001
    #: Whether that actor's entry was verified with its registered key (TrustedActorKey): then every later
    #: message's must be.
    actor_verified = models.BooleanField(default=False)
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


class IntentNonce(SpentValue):
    """Attribution nonces already accepted on ``POST /intent``, kept for the clock-skew window (replays)."""

    nonce = models.CharField(max_length=128, primary_key=True)


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
