"""What the site tells agents about itself and its content: the one site profile (contact details, the IntentWeb
listing, the content signals site-wide and per kind of content) and the documents agents see of each registered
object, which the index builds and nobody edits here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse

from ..admin_lookups import OddLookupsRefused
from ..models import ContentSignalOverride, Document, SiteProfile
from ..registry import content_registry
from .only_what_changed import OnlyWhatChanged, OnlyWhatChangedFormSet


class ContentSignalOverrideInline(OnlyWhatChanged, admin.TabularInline):
    model = ContentSignalOverride
    formset = OnlyWhatChangedFormSet
    extra = 0
    fields = ("content_type", "ai_train", "ai_input", "search", "attribution_required")
    verbose_name = "content signals for one kind of content"
    verbose_name_plural = "content signals per kind of content (empty: as site-wide)"

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "content_type":
            ids = [ContentType.objects.get_for_model(model).pk for model in content_registry.models()]
            kwargs["queryset"] = ContentType.objects.filter(pk__in=ids).order_by("app_label", "model")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(SiteProfile)
class SiteProfileAdmin(OnlyWhatChanged, OddLookupsRefused, admin.ModelAdmin):
    """One page for the one profile: the change list goes straight to it."""

    inlines = [ContentSignalOverrideInline]
    fieldsets = [
        (None, {"fields": ["name", "description"]}),
        ("Contact", {"fields": ["contact_email", "contact_url", "contact_phone", "postal_address"]}),
        (
            "IntentWeb",
            {
                "fields": ["schema_type", "operating_hours"],
                "description": "Published in /intentmanifest.yaml with the contact details and the capabilities.",
            },
        ),
        (
            "Content signals (site-wide)",
            {
                "fields": ["ai_train", "ai_input", "search", "attribution_required"],
                "description": "How AI systems may use this site's content (AHP §7). Published in the manifest, "
                "the Content-Signal header and robots.txt.",
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not SiteProfile.objects.exists()

    always_written = ("updated_at",)  # it names the new state, whatever changed (the inline's signals too)

    def has_delete_permission(self, request: HttpRequest, obj: SiteProfile | None = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        opts = self.model._meta
        if SiteProfile.objects.filter(pk=1).exists():
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[1])
        else:
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_add")
        return HttpResponseRedirect(url)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        defaults = SiteProfile.load()
        return {
            field: getattr(defaults, field)
            for field in ("name", "description", "ai_train", "ai_input", "search", "attribution_required")
        }


@admin.register(Document)
class DocumentAdmin(OddLookupsRefused, admin.ModelAdmin):
    """What agents see of each registered object. Derived data: read-only here, rebuilt by agent_reindex."""

    list_display = ("title", "content_type", "ahp_content_type", "url", "published_at", "updated_at")
    list_filter = ("content_type", "ahp_content_type")
    search_fields = ("title", "url")
    date_hierarchy = "updated_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False
