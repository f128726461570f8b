"""The content gaps in the admin: what agents asked that nothing on the site answers, most asked first.

Staff with ``agent_handshake.view_insights`` see them; changing a gap's status also takes ``change_contentgap``.
Gaps are made from traffic only (no add). Questions are untrusted text: shown escaped, never marked safe.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from ..admin_lookups import OddLookupsRefused
from ..conf import app_settings
from ..models import ContentGap
from . import gaps
from .admin import safe_url

VIEW_INSIGHTS = "agent_handshake.view_insights"
#: The most of a gap's label (an agent's question, up to 1000 characters) its row in the list shows.
LIST_LABEL_CHARS = 100


@admin.register(ContentGap)
class ContentGapAdmin(OddLookupsRefused, admin.ModelAdmin):
    list_display = ("short_label", "count", "last_seen", "nearest_page", "status")
    list_display_links = ("short_label",)
    list_filter = ("status",)
    search_fields = ("label",)
    ordering = ("-count", "-last_seen", "pk")
    fields = ("label", "status", "count", "first_seen", "last_seen", "nearest_page", "example_list")
    readonly_fields = ("label", "count", "first_seen", "last_seen", "nearest_page", "example_list")
    actions = ["mark_answered", "dismiss", "reopen"]
    list_select_related = ("nearest_document",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a gap is found in agents' questions, not typed in

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_INSIGHTS)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_INSIGHTS) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_INSIGHTS) and super().has_delete_permission(request, obj)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra_context = {**(extra_context or {}), "record_questions": app_settings.INSIGHTS_RECORD_QUESTIONS}
        return super().changelist_view(request, extra_context)

    @admin.display(description="label", ordering="label")
    def short_label(self, gap: ContentGap) -> str:
        """The label cut short: a long question, or a word a table cannot wrap (a pasted link), filled the screen
        or ran the list off it. The gap's page shows all of it."""
        return Truncator(gap.label).chars(LIST_LABEL_CHARS)

    @admin.display(description="nearest page", ordering="nearest_score")
    def nearest_page(self, gap: ContentGap) -> str:
        document = gap.nearest_document
        if document is None or gap.nearest_score is None:
            return "-"
        quality = "weak match" if gap.nearest_score >= gaps.weak_line() else "no match"
        url = safe_url(document.url)  # a page's URL is the site's, but never a javascript: link
        if url is None:
            return format_html("{} ({} {})", document.title, quality, f"{gap.nearest_score:.2f}")
        return format_html('<a href="{}">{}</a> ({} {})', url, document.title, quality,
                           f"{gap.nearest_score:.2f}")  # fmt: skip

    @admin.display(description="examples (what agents asked, most recent last)")
    def example_list(self, gap: ContentGap) -> str:
        items = format_html_join("", "<li>{}</li>", ((example,) for example in gap.examples))
        return format_html("<ul>{}</ul>", items) if gap.examples else "-"

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "status":
            field.show_hidden_initial = True  # changed: from the page shown, not another editor's decision since
        return field

    def save_model(self, request: HttpRequest, obj: ContentGap, form: Any, change: bool) -> None:
        """The status set on the page is decided as by the actions (:func:`gaps.set_status`): an answered gap's
        nearest page is measured again. Nothing else is written: the other fields are read-only here, and the
        gap's run writes its count and examples meanwhile; a status left as shown is not written either."""
        if change and "status" in form.changed_data:
            gaps.set_status(ContentGap.objects.filter(pk=obj.pk), obj.status)

    def decide(self, request: HttpRequest, queryset: Any, status: str, verb: str) -> None:
        changed = gaps.set_status(queryset, status)
        self.message_user(request, f"{verb} {changed} content gap{'s' if changed != 1 else ''}.")

    @admin.action(description="Mark answered (content written)", permissions=["change"])
    def mark_answered(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, ContentGap.Status.ANSWERED, "Marked answered:")

    @admin.action(description="Dismiss (not worth answering)", permissions=["change"])
    def dismiss(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, ContentGap.Status.DISMISSED, "Dismissed")

    @admin.action(description="Reopen", permissions=["change"])
    def reopen(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, ContentGap.Status.OPEN, "Reopened")
