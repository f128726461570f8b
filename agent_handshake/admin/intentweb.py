"""IntentWeb in the admin: the keys of the agents and gateways the site trusts, and the interactions (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from ..admin_lookups import OddLookupsRefused
from ..models import Interaction, TrustedActorKey


@admin.register(TrustedActorKey)
class TrustedActorKeyAdmin(OddLookupsRefused, admin.ModelAdmin):
    """Keys of IntentWeb agents and gateways the site trusts: a chain entry naming the actor must verify."""

    list_display = ("actor_id", "label", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("actor_id", "label")


@admin.register(Interaction)
class InteractionAdmin(OddLookupsRefused, admin.ModelAdmin):
    """IntentWeb interactions, read-only: what was asked, routed and collected, and how it ended."""

    list_display = ("interaction_id", "capability", "status", "external_id", "turns", "updated_at")
    list_filter = ("status", "capability")
    search_fields = ("interaction_id", "external_id")
    readonly_fields = [field.name for field in Interaction._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
