"""Agent clients and the API keys they hold: issued here (the secret shown once), scoped to capabilities, expired
or revoked; the key a verified agent's handshake made is listed beside them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from ..admin_lookups import OddLookupsRefused
from ..models import AgentClient, ApiKey
from ..registry import capability_registry
from .only_what_changed import OnlyWhatChanged


def scope_choices() -> list[tuple[str, str]]:
    scopes = sorted({c.scope for c in capability_registry if c.scope})
    return [("*", "every capability (*)")] + [(scope, scope) for scope in scopes]


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=scope_choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="Capabilities this key may invoke; public capabilities need no scope.",
    )

    class Meta:
        model = ApiKey
        fields = ["client", "name", "scopes", "expires_at", "revoked_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A scope no capability declares now (turned off, renamed) keeps a box: without one, saving the key for any
        # other change took the scope away, and the agent got 403 when the capability came back.
        offered = {value for value, _label in self.fields["scopes"].choices}
        kept = [scope for scope in (self.instance.scopes or []) if scope not in offered]
        if kept:
            self.fields["scopes"].choices = [
                *self.fields["scopes"].choices,
                *((scope, f"{scope} (no capability declares it now)") for scope in kept),
            ]
        for field in self.fields.values():
            # Declared fields (scopes) get no formfield_callback: OnlyWhatChanged's shown values, for each.
            field.show_hidden_initial = True


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("name", "key_id", "scopes", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # keys are issued on the API key page, which shows the secret once

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("client")  # each row is named like its client


@admin.register(AgentClient)
class AgentClientAdmin(OnlyWhatChanged, OddLookupsRefused, admin.ModelAdmin):
    list_display = ("name", "contact_email", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "contact_email")
    inlines = [ApiKeyInline]


class KeyHolderFilter(admin.SimpleListFilter):
    """Keys issued here to agent clients, or the keys of verified agents (one each, made by its handshake). Not one
    link per client: every DID that completes a handshake has a client of its own, and anyone may make DIDs."""

    title = "held by"
    parameter_name = "held_by"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("clients", "agent clients (issued here)"), ("verified", "verified agents (their DID's key)")]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        if self.value() in ("clients", "verified"):
            return queryset.filter(verified_agent__isnull=self.value() == "clients")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(OnlyWhatChanged, OddLookupsRefused, admin.ModelAdmin):
    """Issue, scope, expire and revoke keys. The secret is shown once, when the key is created."""

    form = ApiKeyForm
    list_display = ("__str__", "key_id", "scope_list", "expires_at", "revoked_at", "last_used_at")
    list_select_related = ("client",)  # a key's name starts with its client's: one join, not a query per row
    list_filter = (KeyHolderFilter, ("revoked_at", admin.EmptyFieldListFilter))
    autocomplete_fields = ("client",)  # a menu would list every verified agent's client (see KeyHolderFilter)
    search_fields = ("name", "key_id", "client__name")
    readonly_fields = ("key_id", "created_at", "last_used_at")
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes) or "(public capabilities only)"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)  # only what the operator changed (OnlyWhatChanged)
            return
        key, secret = ApiKey.objects.issue(
            obj.client, name=obj.name, scopes=list(obj.scopes or []), expires_at=obj.expires_at
        )
        obj.pk, obj.key_id = key.pk, key.key_id
        obj._issued_secret = secret  # for response_add, in this request only

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        """Show the new key's secret on the response to the form, once: never in ``messages`` (kept in the
        session or a cookie), the session, a log or a redirect URL. The page is not cached."""
        secret = getattr(obj, "_issued_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "key": ApiKey.objects.select_related("client").get(pk=obj.pk),
            "secret": secret,
            "title": "API key issued",
        }
        response = TemplateResponse(request, "admin/agent_handshake/apikey/issued.html", context)
        add_never_cache_headers(response)  # no-store: not kept by the browser either
        return response

    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} key(s) revoked.")
