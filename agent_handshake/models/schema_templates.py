"""Structured schema templates: published versions, editors' key texts, proposed keys and unmapped fragments."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.signals import pre_save
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

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


def language_tag(value: str) -> str:
    """A language tag as translations are kept and looked up: lower case, subtags joined by hyphens."""
    return value.strip().lower().replace("_", "-")


#: A BCP 47 tag's shape once :func:`language_tag` wrote it: a 2 or 3 letter language (or ``x``/``i``, private use
#: and grandfathered), then subtags of 1 to 8 letters and digits. What a client can send as ``preferred_language``.
LANGUAGE_TAG = re.compile(r"(?:[a-z]{2,3}|[xi])(?:-[a-z0-9]{1,8})*")


class LanguageTagField(models.CharField):
    """A language tag, stored and compared as :func:`language_tag` writes it: every value the ORM sends to the
    database (a save, ``QuerySet.update()``, ``bulk_create()``, a lookup's value) goes through it."""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return language_tag(value) if isinstance(value, str) else value


class SchemaKeyText(models.Model):
    """An editor's semantic description of one key of a template, in one language (blank: the default one).

    ``language`` is stored and compared as the templates look it up (:func:`language_tag`: ``FR`` is ``fr``,
    ``pt_BR`` is ``pt-br``), so the unique constraint on (template, key, language) refuses a second text in a
    language however its tag is written, and ``filter(language="FR")`` or ``update_or_create(language="FR")`` finds
    the ``fr`` text: the field (:class:`LanguageTagField`) normalises every value the ORM sends to the database
    (saves, ``QuerySet.update()``, ``bulk_create()``, lookups). A ``pre_save`` receiver normalises the instance's
    own attribute on every save (``save()``, ``create()``, the admin, and ``loaddata``'s raw save of a fixture);
    ``clean()`` does it before ``full_clean()`` checks the constraint. Should a duplicate be stored anyway (in SQL),
    the template publishes the text edited last."""

    template = models.ForeignKey(SchemaTemplate, on_delete=models.CASCADE, related_name="texts")
    key_name = models.CharField(_("key"), max_length=64)
    language = LanguageTagField(
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

    def clean(self) -> None:
        super().clean()
        self.language = language_tag(self.language or "")
        # The site's own language is the default text's: a "translation" into it was served to agents that asked
        # for it and not to the others, both told the text was in that language.
        if self.language and self.language == language_tag(settings.LANGUAGE_CODE):
            raise ValidationError(
                {
                    "language": _(
                        "%(language)s is the site's own language (LANGUAGE_CODE), the default text's: leave the "
                        "language blank for it."
                    )
                    % {"language": self.language}
                }
            )
        # A text under anything else ("French", "fr, de") would be kept and published, and never served: no request
        # asks for that language.
        if self.language and not LANGUAGE_TAG.fullmatch(self.language):
            raise ValidationError(
                {
                    "language": _(
                        "Enter a language tag, as agents ask for it in preferred_language: fr, de-CH, pt-BR, "
                        "zh-Hant (a language of 2 or 3 letters, then parts of letters and digits, joined by hyphens)."
                    )
                }
            )


def normalise_key_text_language(sender: type, instance: SchemaKeyText, **kwargs: Any) -> None:
    """Before any save of a key text, raw ones included (``loaddata`` calls ``save_base``, not ``save()``)."""
    instance.language = language_tag(instance.language or "")


pre_save.connect(normalise_key_text_language, sender=SchemaKeyText, dispatch_uid="agent_handshake.key_text_language")


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
