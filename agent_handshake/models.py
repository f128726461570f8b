from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

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
