"""Verified agents in the admin: the trust an operator can read, pin, set or block, and a delete page that names
the key and client an agent's deletion takes with it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import display_for_value, get_deleted_objects
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from ..admin_lookups import OddLookupsRefused
from ..identity import trust
from ..models import AgentClient, ApiKey, VerifiedAgent
from .only_what_changed import OnlyWhatChanged

#: How many of an agent's trust events its change page shows (newest first).
TRUST_HISTORY_SHOWN = 50


class VerifiedAgentForm(forms.ModelForm):
    class Meta:
        model = VerifiedAgent
        fields = ["trust", "pinned", "blocked", "scopes"]

    def clean_scopes(self) -> list[str]:
        """A list of scope names, nothing else: each request makes a set of them, so a JSON string became one scope
        per character and a number or a nested list a 500 on every request of the agent."""
        scopes = self.cleaned_data.get("scopes")
        if not isinstance(scopes, list) or not all(isinstance(scope, str) and scope for scope in scopes):
            raise forms.ValidationError('Enter a list of scope names, like ["orders", "bookings"] (or [] for none).')
        return scopes


@admin.register(VerifiedAgent)
class VerifiedAgentAdmin(OnlyWhatChanged, OddLookupsRefused, admin.ModelAdmin):
    """Agents that proved their DID. An operator may set the trust (recorded in the history), pin it (requests
    stop changing it), block the DID (every request gets 403) or grant extra scopes."""

    form = VerifiedAgentForm
    list_display = ("did", "agent_id", "trust", "tier", "pinned", "blocked", "last_seen_at")
    list_filter = ("blocked", "pinned")
    search_fields = ("did", "agent_id")
    fields = ("did", "public_key", "agent_id", "capabilities", "trust", "tier", "pinned", "blocked", "scopes",
              "created_at", "last_seen_at", "trust_history")  # fmt: skip
    readonly_fields = ("did", "public_key", "agent_id", "capabilities", "tier", "created_at", "last_seen_at",
                       "trust_history")  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # an agent is verified by its handshake, not typed in

    @admin.display(description="tier")
    def tier(self, agent: VerifiedAgent) -> str:
        return trust.tier_of(agent.trust).name

    @admin.display(description="trust history (newest first)")
    def trust_history(self, agent: VerifiedAgent) -> str:
        """The latest events, as a table, not an inline: every request writes one, and an inline's rows (each with
        its hidden fields) grew the page without bound and, past ~500 requests, made its form more than
        ``DATA_UPLOAD_MAX_NUMBER_FIELDS``: a "400 Bad Request" for the operator blocking the busiest agent."""
        events = list(agent.trust_events.order_by("-created_at", "-pk")[: TRUST_HISTORY_SHOWN + 1])
        if not events:
            return "-"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((display_for_value(event.created_at, "-"), f"{event.delta:+.2f}", f"{event.trust:.2f}", event.reason)
             for event in events[:TRUST_HISTORY_SHOWN]),
        )  # fmt: skip
        more = ""
        if len(events) > TRUST_HISTORY_SHOWN:
            more = format_html("<p>The latest {} of {} events.</p>", TRUST_HISTORY_SHOWN, agent.trust_events.count())
        return format_html(
            "<table><thead><tr><th>when</th><th>change</th><th>trust after</th><th>reason</th></tr></thead>"
            "<tbody>{}</tbody></table>{}",
            rows,
            more,
        )

    def written_fields(self, form: Any) -> list[str]:
        return [name for name in form.changed_data if name != "trust"]  # an operator's trust is recorded: below

    def save_model(self, request: HttpRequest, obj: VerifiedAgent, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if "trust" in form.changed_data:
            wanted = obj.trust
            obj.trust = VerifiedAgent.objects.values_list("trust", flat=True).get(pk=obj.pk)
            trust.set_by_operator(obj, wanted, request.user.get_username() or "an operator")

    # Deleting an agent deletes its key and maybe its client (``models.identity.delete_the_agents_key``), which no
    # cascade reaches: the delete page lists them, with the permissions they need, as if one did. A blocked agent
    # cannot be deleted (``models.identity.refuse_blocked``): the page says so, as it does for a protected object.

    def left_behind(self, agents: Any) -> tuple[list[AgentClient], list[ApiKey]]:
        """What would outlive ``agents``: the clients holding nothing but an agent's key, and the agents' keys whose
        clients hold others too."""
        keys = list(ApiKey.objects.filter(verified_agent__in=list(agents)).select_related("client"))
        shared = set(
            ApiKey.objects.filter(client__in={key.client for key in keys})
            .exclude(pk__in=[key.pk for key in keys])
            .values_list("client_id", flat=True)
        )
        clients = {key.client_id: key.client for key in keys if key.client_id not in shared}
        return list(clients.values()), [key for key in keys if key.client_id in shared]

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[str]]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        agents = {line for line in deleted if isinstance(line, str)}  # the agents themselves, as the page names them
        for group in self.left_behind(objs):
            if not group:
                continue
            more, more_counts, more_perms, more_protected = get_deleted_objects(group, request, self.admin_site)
            deleted += more
            for name, count in more_counts.items():
                counts[name] = counts.get(name, 0) + count
            perms_needed |= more_perms
            protected += [line for line in more_protected if line not in agents]  # they go first
        protected += [
            format_html(
                'Verified agent: <a href="{}">{}</a>, which is blocked. Unblock it first to delete it: a deleted DID '
                "can complete a new handshake and start again at the default trust, so to keep it out, leave it "
                "blocked.",
                reverse(f"{self.admin_site.name}:agent_handshake_verifiedagent_change", args=[agent.pk]),
                agent.did,
            )
            for agent in objs
            if agent.blocked
        ]
        return deleted, counts, perms_needed, protected
