"""What agents may see: the site profile, content signals, agent documents, passages and the BM25 index."""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

from ..conf import app_settings
from ..registry import NotRegistered, content_registry

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
        if not self.content_type_id:
            return
        # Its documents' content type: the model's, for a registered proxy too (found by the label they carry).
        try:
            content_registry.get_config_by_label(f"{self.content_type.app_label}.{self.content_type.model}")
        except NotRegistered:
            raise ValidationError(
                {"content_type": _("Only models registered with agent_handshake have signals.")}
            ) from None

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
    #: The object's primary key as text. Text of any length, as Django's admin log keeps it: a primary key may be a
    #: slug or URL of up to 255 characters, or a CharField without max_length (64 characters refused such objects).
    #: The unique constraint below is its index.
    object_id = models.TextField()
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
