"""The concierge's work in the admin: async jobs and their callbacks (read-only), the human desk where operators
answer the requests agents escalate, and the routing examples that teach the router which capability a request
is for."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils import timezone

from ..admin_lookups import OddLookupsRefused
from ..concierge import job_callbacks, jobs
from ..concierge.desk import message_text, operator_outcome
from ..concierge.invocation import ActionFailed
from ..models import DeskRequest, Job, RoutingExample
from ..registry import capability_registry


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
        count = job_callbacks.resend_callbacks(selected)
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
        return message_text(job)

    @admin.display(description="message")
    def short_message(self, job: Job) -> str:
        return message_text(job, limit=80)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and obj.status != Job.Status.WAITING:
            return self.fields  # answered or expired: nothing left to do
        if obj is not None and obj.expires_at is not None and obj.expires_at <= timezone.now():
            return self.fields  # past its deadline (expired at the next poll): an answer would be refused
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: DeskRequest, form: Any, change: bool) -> None:
        answer = form.cleaned_data.get("operator_answer")
        if not answer:  # the form had no answer field: the request was answered, expired or ran out meanwhile
            jobs.expire(pk=obj.pk)  # one that ran out is expired now (its callback says so), as a poll would
            obj.refresh_from_db(fields=["status"])
            messages.error(request, f"This request is {obj.get_status_display().lower()}; it takes no answer.")
            obj._answer_refused = True
            return
        operator = request.user.get_full_name() or request.user.get_username()
        try:
            jobs.complete_waiting(obj.pk, operator_outcome(answer, operator))
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
