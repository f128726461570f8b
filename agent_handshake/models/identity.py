"""Who calls: agent clients and their API keys, signed-request replay guards, verified agents (DIDs), the site key."""

from __future__ import annotations

import base64
import re
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, router, transaction
from django.db.models import ProtectedError
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _

from .. import keys
from .retention import Forgettable

# --- MODE3: agent clients, API keys, jobs ------------------------------------------------------------------------


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
        return keys.recover_secret(self.key_id, self.salt, self.secret_hash)


class SpentValue(Forgettable):
    """A one-time value (a signature, a nonce) already accepted, so that a replay of it is refused: a subclass
    declares the value as its primary key. Rows are kept for the clock-skew window, past which a replay is refused
    for its timestamp anyway, and then forgotten."""

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return str(self.pk)

    @classmethod
    def spend(cls, value: str) -> bool:
        """Record ``value`` as spent; False if it was already (a replay). The primary key decides, so two concurrent
        requests cannot both spend it, and a refusal leaves the caller's transaction usable (a savepoint)."""
        try:
            with transaction.atomic(using=router.db_for_write(cls)):
                cls._default_manager.create(pk=value)
        except IntegrityError:
            return False
        return True


class SeenSignature(SpentValue):
    """Signatures of signed requests already accepted, kept for the clock-skew window (the replay cache)."""

    signature = models.CharField(max_length=64, primary_key=True)


# --- verified agent identity (Agent Semantic Protocol DIDs) -------------------------------------------------------


class VerifiedAgentQuerySet(models.QuerySet["VerifiedAgent"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Refused, like a protected relation, if any of the agents is blocked (see :func:`refuse_blocked`)."""
        using = self._db or router.db_for_write(self.model, **self._hints)
        with transaction.atomic(using=using):
            refuse_blocked(self.using(using))
            return super().delete()


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

    objects = VerifiedAgentQuerySet.as_manager()

    class Meta:
        verbose_name = _("verified agent")
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return self.agent_id or self.did

    def delete(self, using: str | None = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        """Refused, like a protected relation, if the agent is blocked (see :func:`refuse_blocked`)."""
        using = using or router.db_for_write(type(self), instance=self)
        with transaction.atomic(using=using):
            refuse_blocked(type(self)._default_manager.using(using).filter(pk=self.pk))
            return super().delete(using=using, keep_parents=keep_parents)


def refuse_blocked(agents: models.QuerySet[VerifiedAgent]) -> None:
    """Raise :class:`~django.db.models.ProtectedError` if any of ``agents``, about to be deleted, is blocked.

    The block lives on the agent, and a deleted DID can complete a new handshake and start afresh at the default
    trust: deleting a blocked agent unblocked its DID. So it stays until an operator unblocks it. The agents are
    locked until the deletion commits, so none can be blocked between this check and its deletion."""
    # Locked by primary key: the deletion's own queryset may have DISTINCT or joins, which FOR UPDATE refuses.
    selected = VerifiedAgent._default_manager.using(agents.db).filter(pk__in=agents.values("pk"))
    blocked = [pk for pk, is_blocked in selected.select_for_update().values_list("pk", "blocked") if is_blocked]
    if blocked:
        found = list(selected.filter(pk__in=blocked))
        raise ProtectedError(
            f"Cannot delete a blocked verified agent ({', '.join(agent.did for agent in found)}): a deleted DID can "
            "complete a new handshake and start again at the default trust. Leave it blocked to keep it out, or "
            "unblock it first to delete it.",
            set(found),
        )


@receiver(post_delete, sender=VerifiedAgent, dispatch_uid="agent_handshake:verified_agent_key")
def delete_the_agents_key(sender: type[VerifiedAgent], instance: VerifiedAgent, using: str, **kwargs: Any) -> None:
    """An agent's key is its alone (only its sessions stood for it), but the agent points to the key, so no cascade
    takes it: it goes here, after the agent and in the same transaction, whatever deleted the agent (the admin,
    ``delete()``, a queryset's ``delete()``), with what it owned (sessions, interactions, idempotency records).
    So does its client, unless an operator gave that client other keys; otherwise a deleted agent's key stayed
    a live credential, and the DID's next handshake got a second client, "<did> (2)"."""
    keys = ApiKey.objects.using(using).filter(pk=instance.key_id)
    client_id = keys.values_list("client_id", flat=True).first()
    keys.delete()
    AgentClient.objects.using(using).filter(pk=client_id, keys__isnull=True).delete()


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
    #: The site DID this handshake's answer spoke with, which the agent's signature names: the key may rotate (or
    #: workers not yet restarted after a rotation serve the old one) before the agent answers. Blank: the current.
    site_did = models.CharField(max_length=100, blank=True, default="")
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
