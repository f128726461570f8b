"""Schema templates in the admin: the texts editors write for a template's keys, and the keys proposed from what
agents put in "other", which editors approve, promote, retire or reject. Whatever touches a security-relevant key
(identity, payment or access, or a capability that needs credentials or is gone) needs the permission
``agent_handshake.change_security_keys``."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from ..admin_lookups import OddLookupsRefused
from ..concierge import input_pool, template_publishing
from ..models import ProposedField, SchemaKeyText, SchemaTemplate
from ..registry import capability_registry
from ..schema_templates import templates as schema_templates

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
        return template_publishing.language_tag(self.cleaned_data.get("language") or "")


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
            template_publishing.current(capability)
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
        if name in declared or name == template_publishing.OTHER:
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
