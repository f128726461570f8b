from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import display_for_value, get_deleted_objects
from django.contrib.auth import get_permission_codename
from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html, format_html_join

from .admin_lookups import OddLookupsRefused
from .concierge import input_pool, jobs
from .identity import trust
from .models import (
    AgentClient,
    ApiKey,
    ContentSignalOverride,
    DeskRequest,
    Document,
    Interaction,
    Job,
    ProposedField,
    RoutingExample,
    SchemaKeyText,
    SchemaTemplate,
    SiteProfile,
    TrustedActorKey,
    VerifiedAgent,
)
from .registry import capability_registry, content_registry
from .schema_templates import templates as schema_templates


class OnlyWhatChanged:
    """A change page that writes only what the editor changed: what differs from the page they were shown (each
    field of the model carries its shown value, ``show_hidden_initial``), not from the row when they save. Writing
    the rest of the copy loaded with the form would undo what was written meanwhile: a revocation, a deactivation,
    a content signal another editor saved, the trust an agent's requests earned."""

    #: Written with every change, besides the fields the editor changed.
    always_written: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if field is not None and db_field.model is self.model:  # type: ignore[attr-defined]
            field.show_hidden_initial = True
        return field

    def written_fields(self, form: Any) -> list[str]:
        return list(form.changed_data)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            return
        fields = [*self.written_fields(form), *self.always_written]
        if fields:
            obj.save(update_fields=fields)


class OnlyWhatChangedFormSet(forms.BaseInlineFormSet):
    """:class:`OnlyWhatChanged` for an inline's rows: a row the editor left as shown is not written, and a changed
    one writes only the fields changed from the page shown (the inline gives its fields their shown values with
    ``OnlyWhatChanged``), not the values the page was loaded with over another editor's change meanwhile."""

    #: Written with every change of a row, besides the fields the editor changed: its ``updated_at`` names the new
    #: state (the state token, Last-Modified).
    always_written: tuple[str, ...] = ("updated_at",)

    def save_existing(self, form: Any, obj: Any, commit: bool = True) -> Any:
        if not commit:
            return super().save_existing(form, obj, commit=commit)
        obj.save(update_fields=[*form.changed_data, *self.always_written])
        return obj


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


# --- MODE3: agent clients and their keys, jobs, the human desk --------------------------------------------------


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


class ReadOnlyJobMixin:
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


JOB_FIELDS = (
    "id",
    "capability",
    "api_key",
    "requesting_agent",
    "query",
    "input",
    "status",
    "progress",
    "attempts",
    "result",
    "error",
    "created_at",
    "started_at",
    "finished_at",
    "expires_at",
)
CALLBACK_FIELDS = (
    "callback_url",
    "callback_state",
    "callback_attempts",
    "callback_last_status",
    "callback_last_error",
    "callback_next_attempt_at",
    "callback_delivered_at",
)


@admin.register(Job)
class JobAdmin(OddLookupsRefused, ReadOnlyJobMixin, admin.ModelAdmin):
    """Every async job and its callback delivery, read-only."""

    list_display = ("id", "capability", "status", "attempts", "created_at", "finished_at", "callback_state")
    list_filter = ("status", "capability", "callback_state")
    search_fields = ("id", "requesting_agent", "query")
    date_hierarchy = "created_at"
    fieldsets = [(None, {"fields": JOB_FIELDS}), ("Callback", {"fields": CALLBACK_FIELDS})]

    actions = ["resend_callbacks"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # Django's view-only change page shows every field

    def has_resend_permission(self, request: HttpRequest) -> bool:
        """Staff who may change jobs (the page itself is read-only for everyone)."""
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('change', self.opts)}")

    @admin.action(description="Send the selected jobs' failed callbacks again", permissions=["resend"])
    def resend_callbacks(self, request: HttpRequest, queryset: Any) -> None:
        selected = list(queryset.values_list("pk", flat=True))
        count = jobs.resend_callbacks(selected)
        message = f"{count} callback(s) queued to be sent again."
        if len(selected) > count:
            message += (
                f" {len(selected) - count} left as they were: only a finished job's failed callback is sent again."
            )
        self.message_user(request, message, messages.SUCCESS if count else messages.WARNING)


class DeskAnswerForm(forms.ModelForm):
    operator_answer = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}),
        required=True,
        help_text="Sent to the agent as the answer, by poll and callback.",
    )

    class Meta:
        model = DeskRequest
        fields = ["operator_answer"]


@admin.register(DeskRequest)
class DeskRequestAdmin(OddLookupsRefused, ReadOnlyJobMixin, admin.ModelAdmin):
    """The human desk: requests escalated by agents, waiting ones first. Saving an answer completes the job."""

    form = DeskAnswerForm
    list_display = ("created_at", "capability", "short_message", "status", "expires_at", "answered_by")
    # Named: Django's own select_related for a list follows no nullable relation, so each answered row read its
    # operator with a query of its own.
    list_select_related = ("answered_by",)
    list_filter = ("status",)
    search_fields = ("query", "requesting_agent")
    readonly_fields = ("capability", "requesting_agent", "message", "input", "status", "created_at", "expires_at")
    fields = (*readonly_fields, "operator_answer")

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).filter(needs_operator=True).order_by("-status", "created_at")

    # Plain strings: the admin escapes them, whatever the agent put in its message.
    @admin.display(description="message")
    def message(self, job: Job) -> str:
        from .concierge.desk import message_text

        return message_text(job)

    @admin.display(description="message")
    def short_message(self, job: Job) -> str:
        from .concierge.desk import message_text

        return message_text(job, limit=80)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and obj.status != Job.Status.WAITING:
            return self.fields  # answered or expired: nothing left to do
        if obj is not None and obj.expires_at is not None and obj.expires_at <= timezone.now():
            return self.fields  # past its deadline (expired at the next poll): an answer would be refused
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: DeskRequest, form: Any, change: bool) -> None:
        from .concierge.desk import operator_outcome
        from .concierge.invocation import ActionFailed
        from .concierge.jobs import complete_waiting

        answer = form.cleaned_data.get("operator_answer")
        if not answer:  # the form had no answer field: the request was answered, expired or ran out meanwhile
            jobs.expire(pk=obj.pk)  # one that ran out is expired now (its callback says so), as a poll would
            obj.refresh_from_db(fields=["status"])
            messages.error(request, f"This request is {obj.get_status_display().lower()}; it takes no answer.")
            obj._answer_refused = True
            return
        operator = request.user.get_full_name() or request.user.get_username()
        try:
            complete_waiting(obj.pk, operator_outcome(answer, operator))
        except ActionFailed as exc:
            messages.error(request, exc.message)
            obj._answer_refused = True
            return
        DeskRequest.objects.filter(pk=obj.pk).update(operator_answer=answer, answered_by=request.user)
        messages.success(request, "The answer was sent to the agent.")

    # A refused answer (another operator's came first, or the request expired) is no change: not recorded in the
    # history as this operator's, nor reported as "changed successfully" beside the refusal.
    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if getattr(obj, "_answer_refused", False):
            return None
        return super().log_change(request, obj, message)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        if getattr(obj, "_answer_refused", False):
            return HttpResponseRedirect(request.path)  # the request as it is now, with the refusal
        return super().response_change(request, obj)


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


# --- schema templates: editors' key texts, and the keys proposed from what agents put in "other" ----------------

SECURITY_PERMISSION = "agent_handshake.change_security_keys"


def may_change_security_keys(request: HttpRequest) -> bool:
    return request.user.has_perm(SECURITY_PERMISSION)


class SchemaKeyTextForm(forms.ModelForm):
    key_name = forms.ChoiceField(label="key")

    class Meta:
        model = SchemaKeyText
        fields = ("key_name", "language", "semantic_description")
        widgets = {"semantic_description": forms.Textarea(attrs={"rows": 3, "cols": 80})}

    def clean_language(self) -> str:
        """The tag as the templates keep and look it up (``FR_ca`` is ``fr-ca``), so that the row's unique
        constraint compares what the templates compare."""
        return schema_templates.language_tag(self.cleaned_data.get("language") or "")


class SchemaKeyTextFormSet(forms.BaseInlineFormSet):
    #: Set by :meth:`SchemaKeyTextInline.get_formset`.
    request: HttpRequest
    capability: Any = None

    def clean(self) -> None:
        self.refuse_a_second_text_in_one_language()
        super().clean()
        if may_change_security_keys(self.request):
            return
        for form in self.forms:
            if not form.has_changed() and not (self.can_delete and self._should_delete_form(form)):
                continue
            names = {form.cleaned_data.get("key_name"), form.initial.get("key_name")} - {None}
            # A capability that is gone counts as security-relevant, as for its proposed keys (guarded()): what it
            # needed is unknown, and its texts are published again when it comes back.
            capability = self.capability
            guarded = sorted(
                name for name in names if capability is None or schema_templates.security_relevant(capability, name)
            )
            if guarded:
                raise forms.ValidationError(
                    f"{', '.join(guarded)} {'is' if len(guarded) == 1 else 'are'} security-relevant (identity, "
                    "payment or access, or the capability needs credentials or is gone): changing how agents are told "
                    "to fill it needs the permission 'Can change security-relevant keys of schema templates'."
                )

    def refuse_a_second_text_in_one_language(self) -> None:
        """A template keeps one text per key and language (the last one it read): a second, however its tag is
        written (``fr``, ``FR``; ``fr_CA``, ``fr-CA``), would have left the other stored but never published. Rows
        stored before tags were normalised are compared as the templates read them too."""
        seen: set[tuple[str, str]] = set()
        for form in self.forms:
            if self.can_delete and self._should_delete_form(form):
                continue
            name, language = form.cleaned_data.get("key_name"), form.cleaned_data.get("language")
            if name is None or language is None:
                continue  # an empty extra row, or one refused already
            if (name, language) in seen:
                form.add_error(
                    "language",
                    f"The key {name!r} already has a text in this language ({language or 'default'}), above: "
                    "a language tag is read without regard to case, and _ as -. Change that text, or delete one.",
                )
            seen.add((name, language))


class SchemaKeyTextInline(admin.TabularInline):
    model = SchemaKeyText
    form = SchemaKeyTextForm
    formset = SchemaKeyTextFormSet
    extra = 1
    verbose_name = "key description written by an editor"
    verbose_name_plural = (
        "key descriptions written by editors (blank language: replaces the generated text; otherwise a translation)"
    )

    def get_formset(self, request: HttpRequest, obj: SchemaTemplate | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        capability = capability_registry.get(obj.scenario) if obj is not None else None
        names = [key["key_name"] for key in (obj.published.get("keys", []) if obj is not None else [])]
        gone = sorted({text.key_name for text in obj.texts.all()} - set(names)) if obj is not None else []
        # A field of this page's own: the form class's is one object every page shares, so setting its choices
        # let two editors at once check (and offer) each other's template's keys.
        key_name = forms.ChoiceField(
            label="key",
            choices=[(name, name) for name in names] + [(name, f"{name} (no longer in the template)") for name in gone],
        )
        form = type(formset.form.__name__, (formset.form,), {"key_name": key_name})
        return type(formset.__name__, (formset,), {"request": request, "capability": capability, "form": form})


@admin.register(SchemaTemplate)
class SchemaTemplateAdmin(OddLookupsRefused, admin.ModelAdmin):
    """One row per scenario (MODE3 capability), made from its declaration: editors refine the key texts, and the
    template is published again with the next version when they save."""

    list_display = ("scenario", "schema_id", "updated_at")
    readonly_fields = ("scenario", "schema_id", "updated_at", "template")
    fields = readonly_fields
    inlines = [SchemaKeyTextInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a new row would start again at version 1: schema_ids agents hold would name other content

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        for capability in schema_templates.offered():  # a template for every scenario, before editors look
            schema_templates.current(capability)
        return super().changelist_view(request, extra_context)

    def save_model(self, request: HttpRequest, obj: SchemaTemplate, form: Any, change: bool) -> None:
        """Nothing: the row has no field an editor changes (its inlines are saved), and writing the copy this
        request loaded would undo a publish that committed meanwhile."""

    @admin.display(description="published template (default language)")
    def template(self, obj: SchemaTemplate) -> str:
        return format_html("<pre>{}</pre>", json.dumps(schema_templates.render(obj), indent=2, ensure_ascii=False))


#: Proposed keys that are or were published: they are retired, never deleted (the pool would propose them again).
NEVER_DELETED = (*ProposedField.PUBLISHED, ProposedField.Status.RETIRED)


class ProposedFieldForm(forms.ModelForm):
    #: Set by :meth:`ProposedFieldAdmin.get_form`.
    request: HttpRequest

    class Meta:
        model = ProposedField
        fields = ("name", "value_type", "description")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        proposal = self.instance
        capability = capability_registry.get(proposal.capability)
        declared = set(((capability.input_schema if capability else None) or {}).get("properties", {}))
        if name in declared or name == schema_templates.OTHER:
            raise forms.ValidationError(f"{name!r} is already a key of this template.")
        if ProposedField.objects.filter(capability=proposal.capability, name=name).exclude(pk=proposal.pk).exists():
            raise forms.ValidationError(f"Another proposed key of {proposal.capability} is named {name!r}.")
        guarded_name = capability is not None and schema_templates.security_relevant(capability, name)
        if guarded_name and not may_change_security_keys(self.request):
            raise forms.ValidationError(
                f"{name!r} would be a security-relevant key (identity, payment or access): naming it so needs the "
                "permission 'Can change security-relevant keys of schema templates'."
            )
        return name


@admin.register(ProposedField)
class ProposedFieldAdmin(OddLookupsRefused, admin.ModelAdmin):
    """Keys proposed from the differential semantic pool. An editor approves one (experimental: published in the
    template), then promotes it (stable) or retires it; or rejects it. For a capability that needs credentials,
    each decision needs the permission to change security-relevant keys."""

    list_display = ("name", "capability", "value_type", "status", "fragments", "sources", "senders_filled",
                    "senders_refused", "created_at")  # fmt: skip
    list_filter = ("status", "capability")
    fields = ("capability", "name", "value_type", "description", "status", "fragments", "sources", "example_list",
              "senders_filled", "senders_refused", "reaches_capability", "decided_by", "decided_at")  # fmt: skip
    actions = ["approve", "promote", "retire", "reject"]
    form = ProposedFieldForm

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"request": request})

    def save_model(self, request: HttpRequest, obj: ProposedField, form: Any, change: bool) -> None:
        # Only what the editor changed: the pool and the counters write the other columns meanwhile.
        obj.save(update_fields=[*form.changed_data, "updated_at"] if change else None)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_delete_permission(request, obj)
        if allowed and obj is not None and obj.status in NEVER_DELETED:
            return False  # agents were told of it: deleting it would drop its counts, its decision and its fragments
        if allowed and obj is not None and guarded(obj):
            return may_change_security_keys(request)
        return allowed

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fixed = ["capability", "status", "fragments", "sources", "example_list", "senders_filled", "senders_refused",
                 "reaches_capability", "decided_by", "decided_at"]  # fmt: skip
        if obj is not None and obj.status != ProposedField.Status.PENDING:
            fixed += ["name", "value_type"]  # agents may already send it under this name and type
        return fixed

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_change_permission(request, obj)
        if allowed and obj is not None and guarded(obj):
            return may_change_security_keys(request)
        return allowed

    @admin.display(description="examples (what agents wrote; for editors only)")
    def example_list(self, obj: ProposedField) -> str:
        return format_html_join("", "<p>{}</p>", ((example,) for example in obj.examples)) or "-"

    # Senders, not requests (input_pool.count_use): one caller repeating a submission counts once.
    @admin.display(description="senders who filled it", ordering="filled")
    def senders_filled(self, obj: ProposedField) -> int:
        return obj.filled

    @admin.display(description="senders whose value was refused", ordering="failures")
    def senders_refused(self, obj: ProposedField) -> int:
        return obj.failures

    @admin.display(description="values reach the capability")
    def reaches_capability(self, obj: ProposedField) -> str:
        if capability_registry.get(obj.capability) is None:
            return "no: the capability is gone"
        if never_received(obj):
            return "no: " + NEVER_RECEIVED.format(capability=obj.capability)
        return "yes"

    def decide(self, request: HttpRequest, queryset: Any, start: tuple[str, ...], status: str, verb: str) -> None:
        done, skipped, decided = 0, [], []
        for proposal in queryset:
            if proposal.status not in start:
                skipped.append(f"{proposal.name} is {proposal.get_status_display()}")
            elif not self.has_change_permission(request, proposal):
                skipped.append(f"{proposal.name} is security-relevant (permission needed)")
            elif input_pool.decide(proposal, status, request.user, start):
                done += 1
                decided.append(proposal)
            elif proposal.status in start:  # deleted meanwhile
                skipped.append(f"{proposal.name} no longer exists")
            else:  # another editor decided meanwhile
                skipped.append(f"{proposal.name} is {proposal.get_status_display()}")
        if done:
            self.message_user(request, f"{verb.capitalize()} {done} proposed key{'s' if done != 1 else ''}.")
        if status in ProposedField.PUBLISHED and (unheard := [p for p in decided if never_received(p)]):
            self.message_user(
                request,
                "; ".join(f"{p.name}: {NEVER_RECEIVED.format(capability=p.capability)}" for p in unheard) + ".",
                messages.WARNING,
            )
        if skipped:
            self.message_user(request, f"Not {verb}: " + "; ".join(skipped) + ".", messages.WARNING)

    @admin.action(description="Approve: publish as experimental", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, (ProposedField.Status.PENDING,), ProposedField.Status.EXPERIMENTAL, "approved")

    @admin.action(description="Promote to stable", permissions=["change"])
    def promote(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, (ProposedField.Status.EXPERIMENTAL,), ProposedField.Status.STABLE, "promoted")

    @admin.action(description="Retire (no longer published)", permissions=["change"])
    def retire(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, ProposedField.PUBLISHED, ProposedField.Status.RETIRED, "retired")

    @admin.action(description="Reject", permissions=["change"])
    def reject(self, request: HttpRequest, queryset: Any) -> None:
        self.decide(request, queryset, (ProposedField.Status.PENDING,), ProposedField.Status.REJECTED, "rejected")


#: What an editor is told of a published key whose capability refuses properties it does not declare.
NEVER_RECEIVED = (
    "{capability}'s input_schema has additionalProperties: false, so agents' values for this key are "
    "counted but never reach the capability; declare the key in its input_schema for it to receive them"
)


def never_received(proposal: ProposedField) -> bool:
    """Whether a published proposal's values stay out of its capability's input (``templates.check_payload``)."""
    capability = capability_registry.get(proposal.capability)
    return capability is not None and (capability.input_schema or {}).get("additionalProperties", True) is False


def guarded(proposal: ProposedField) -> bool:
    """Whether changing or deciding on a proposal needs the security permission: it is security-relevant (its
    capability needs credentials, or its name is about identity, payment or access); a capability that is gone
    counts as one."""
    capability = capability_registry.get(proposal.capability)
    return capability is None or schema_templates.security_relevant(capability, proposal.name)


# --- verified agents: trust an operator can read, pin, set or block ----------------------------------------------


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


# --- agent traffic insights: the overview, each agent's page and the CSV export (agent_handshake/insights/) ------
from .insights import admin as insights_admin  # noqa: E402, F401
from .insights import gaps_admin  # noqa: E402, F401  (the content gaps)


class RoutingExampleForm(forms.ModelForm):
    """The capability is chosen among those registered now (an example's name stays as it was when the capability
    is gone, and can be changed to another); the request is kept as written, without the spaces around it."""

    class Meta:
        model = RoutingExample
        fields = ["capability", "text", "note"]
        widgets = {"text": forms.Textarea(attrs={"rows": 3, "cols": 80})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = [capability.name for capability in capability_registry]
        current = self.instance.capability if self.instance.pk else ""
        choices = [(name, name) for name in names]
        if current and current not in names:
            choices.append((current, f"{current} (no longer registered)"))
        self.fields["capability"] = forms.ChoiceField(
            choices=[("", "---------"), *choices],
            help_text="The capability a request like this one is for.",
        )
        self.fields["text"].help_text = (
            "A request as an agent or a person would send it. The router compares each request with every "
            "capability's texts (its intent, description, declared examples and these), after the site's name and "
            "topic are left out."
        )

    def clean_text(self) -> str:
        text = self.cleaned_data["text"].strip()
        if not text:
            raise forms.ValidationError("Enter the request.")
        return text


@admin.register(RoutingExample)
class RoutingExampleAdmin(OddLookupsRefused, admin.ModelAdmin):
    """Requests that teach the router which capability is meant, beside the examples the capabilities declare
    in code: add one for a request an agent's traffic shows going to the wrong capability. The site's examples
    are read again within ``STATE_TTL`` seconds in every process, and their vectors computed once per deployment
    (with a shared cache)."""

    form = RoutingExampleForm
    list_display = ("text", "capability", "registered", "note", "created_at")
    list_filter = ("capability",)
    search_fields = ("text", "note")
    ordering = ("capability", "-created_at", "-pk")

    @admin.display(description="registered", boolean=True)
    def registered(self, example: RoutingExample) -> bool:
        return capability_registry.get(example.capability) is not None
