"""The owners' view of agent traffic in the Django admin: an overview ("Agent traffic") over a date range, one page
per agent, and a CSV export of the daily rows, for staff with the ``agent_handshake.view_insights`` permission
(superusers have it). Read-only: agents write the rows, nobody edits them here.

Everything agents sent (their names, capabilities, questions) is untrusted text: templates escape it, the charts
carry it as plain strings, and the CSV neutralises cells a spreadsheet would run as a formula.
"""

from __future__ import annotations

import csv
import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.http import urlencode

from ..conf import app_settings
from ..models import AgentRequest, ContentGap, RoutingExample
from ..models.insights import Outcome
from ..models.routing import EXAMPLE_MAX_CHARS
from ..text import visible_name
from . import charts
from .aggregation import KEY_FIELDS, TrafficRange, format_latency, percentile, site_today
from .summary import build_report, by_requests

PERMISSION = "agent_handshake.view_insights"
#: The longest range a page or an export covers (days).
MAX_DAYS = 366
DEFAULT_DAYS = 14
EARLIEST = datetime.date(2000, 1, 1)
#: The raw requests an agent's page lists.
RECENT = 50
#: The longest note a routing example keeps (``RoutingExample.note``).
NOTE_MAX_CHARS = RoutingExample._meta.get_field("note").max_length
#: The note a routing example filed from an agent's page is given.
NOTE = "From the agent traffic of {agent}, {day:%Y-%m-%d}"
#: Cells starting with one of these are formulas to a spreadsheet (OWASP "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def may_view_insights(request: HttpRequest) -> bool:
    return request.user.is_active and request.user.is_staff and request.user.has_perm(PERMISSION)


class RangeForm(forms.Form):
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        today = site_today()
        end = data.get("end") or today
        if end < EARLIEST:  # before the default start is computed from it (0001-01-05 minus 13 days overflows)
            raise forms.ValidationError(f"The range ends before {EARLIEST}.")
        start = data.get("start") or end - datetime.timedelta(days=DEFAULT_DAYS - 1)
        if start > end:
            raise forms.ValidationError("The start is after the end.")
        if end > today:
            raise forms.ValidationError("The range ends after today.")
        if start < EARLIEST:  # also keeps day arithmetic far from date.min
            raise forms.ValidationError(f"The range starts before {EARLIEST}.")
        if (end - start).days + 1 > MAX_DAYS:
            raise forms.ValidationError(f"A range covers at most {MAX_DAYS} days.")
        data["start"], data["end"] = start, end
        return data

    def range(self) -> tuple[datetime.date, datetime.date]:
        """The valid range, or the default one (the last 14 days) when the form has errors."""
        if self.is_valid():
            return self.cleaned_data["start"], self.cleaned_data["end"]
        today = site_today()
        return today - datetime.timedelta(days=DEFAULT_DAYS - 1), today


def neutralise(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text, never runs as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def per_day(rows: list[dict[str, Any]], days: list[datetime.date], name: str, metric: str = "requests"):
    """``{series value: [metric per day]}`` from rows grouped by day and ``name``, biggest series first."""
    index = {day: n for n, day in enumerate(days)}
    series: dict[str, list[int]] = {}
    for row in rows:
        values = series.setdefault(str(row[name]) or "(none)", [0] * len(days))
        values[index[row["day"]]] += row[metric]
    return dict(sorted(series.items(), key=lambda item: (-sum(item[1]), item[0])))


def day_charts(traffic: Any, days: list[datetime.date], slug: str = "") -> list[charts.Chart]:
    by_protocol = traffic.summary("day", "protocol")
    by_outcome = traffic.summary("day", "outcome")
    daily = {row["day"]: row for row in traffic.summary("day")}
    tokens = [daily[day]["tokens"] if day in daily else 0 for day in days]
    limited = [daily[day]["rate_limited"] if day in daily else 0 for day in days]
    p50 = [percentile(daily[day]["latency_histogram"], 0.5) if day in daily else None for day in days]
    p95 = [percentile(daily[day]["latency_histogram"], 0.95) if day in daily else None for day in days]
    return [
        charts.stacked_bars(
            "Requests per day by protocol", days, per_day(by_protocol, days, "protocol"),
            "Agent requests each day, stacked by the protocol they came in by.", slug=f"{slug}protocol",
        ),
        charts.stacked_bars(
            "Requests per day by outcome", days, per_day(by_outcome, days, "outcome"),
            "Agent requests each day, stacked by how they ended.", slug=f"{slug}outcome",
            colours=charts.OUTCOME_COLOURS,
        ),
        charts.stacked_bars(
            "Model tokens per day", days, {"tokens": tokens}, "Tokens the answer model used each day.",
            slug=f"{slug}tokens",
        ),
        charts.stacked_bars(
            "Rate limited (429) per day", days, {"429s": limited}, "Requests refused for a rate limit each day.",
            slug=f"{slug}limited",
        ),
        charts.lines(
            "Latency per day (ms)", days, {"p50": p50, "p95": p95},
            "Median and 95th percentile latency each day, to the upper bound of the histogram bucket.",
            slug=f"{slug}latency", unit=" ms",
        ),
    ]  # fmt: skip


@admin.register(AgentRequest)
class AgentTrafficAdmin(admin.ModelAdmin):
    """The changelist of agent requests is the traffic overview; the raw rows are shown on each agent's page."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_view_insights(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("agent/", view(self.agent_view), name="agent_handshake_insights_agent"),
            path("export.csv", view(self.export_view), name="agent_handshake_insights_csv"),
            path("", view(self.changelist_view), name="agent_handshake_agentrequest_changelist"),
        ]

    def context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "retention_days": app_settings.INSIGHTS_RETENTION_DAYS,
            **extra,
        }

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if not may_view_insights(request):
            raise PermissionDenied
        form = RangeForm(request.GET or None)
        start, end = form.range()
        report = build_report(start, end, top=20)
        days = report.traffic.days
        gaps_url = None
        if ContentGap in self.admin_site._registry:
            gaps_url = reverse(f"{self.admin_site.name}:agent_handshake_contentgap_changelist")
        query = urlencode({"start": start.isoformat(), "end": end.isoformat()})
        context = self.context(
            request,
            "Agent traffic",
            form=form,
            start=start,
            end=end,
            report=report,
            charts=day_charts(report.traffic, days),
            csv_url=f"{reverse('admin:agent_handshake_insights_csv')}?{query}",
            agent_url=reverse("admin:agent_handshake_insights_agent"),
            range_query=query,
            gaps_url=gaps_url,
            cited=[(document, count, safe_url(document.url)) for document, count in report.cited],
            never_cited=[(document, safe_url(document.url)) for document in report.never_cited],
        )
        return TemplateResponse(request, "admin/agent_handshake/insights/overview.html", context)

    def agent_view(self, request: HttpRequest) -> HttpResponse:
        if not may_view_insights(request):
            raise PermissionDenied
        agent = request.GET.get("agent", "")
        # A NUL: no stored name holds one, and PostgreSQL refuses it in a query.
        if not agent or len(agent) > AgentRequest._meta.get_field("agent").max_length or "\x00" in agent:
            raise Http404("No such agent.")
        form = RangeForm(request.GET)
        start, end = form.range()
        traffic = TrafficRange(start, end, agent=agent)
        total = traffic.total()
        days = traffic.days
        problems = [
            row for row in traffic.summary("day", "capability", "outcome")
            if row["outcome"] in (Outcome.ERROR, Outcome.RATE_LIMITED, Outcome.REFUSED)
        ]  # fmt: skip
        recent = self.with_example_links(
            request, list(AgentRequest.objects.filter(agent=agent).order_by("-at")[:RECENT])
        )
        query = urlencode({"start": start.isoformat(), "end": end.isoformat()})
        context = self.context(
            request,
            f"Agent traffic: {agent}",  # autoescaped in the template like every other value
            agent=agent,
            form=form,
            start=start,
            end=end,
            total=total,
            p50=format_latency(percentile(total["latency_histogram"], 0.5)),
            p95=format_latency(percentile(total["latency_histogram"], 0.95)),
            kinds=sorted({row["agent_kind"] for row in traffic.summary("agent_kind")}),
            outcomes=by_requests(traffic.summary("outcome")),
            capabilities=by_requests(traffic.summary("capability")),
            problems=sorted(problems, key=lambda row: (row["day"], row["outcome"], row["capability"]), reverse=True),
            charts=[chart for chart in day_charts(traffic, days, slug="agent-") if "tokens" not in chart.slug],
            recent=recent,
            overview_url=f"{reverse('admin:agent_handshake_agentrequest_changelist')}?{query}",
        )
        return TemplateResponse(request, "admin/agent_handshake/insights/agent.html", context)

    def with_example_links(self, request: HttpRequest, recent: list[AgentRequest]) -> list[tuple[AgentRequest, Any]]:
        """Each recent request with what the operator can do with its question as a routing example: the
        *Routing examples* add form's URL, filled in with the question (to choose the capability it is for and
        save), or the capability an example of that text is filed under already; None without a question, or for
        a viewer who may not add routing examples."""
        add = f"{self.admin_site.name}:agent_handshake_routingexample_add"
        # The examples' own admin decides (a site may make it read-only), not the permission alone.
        registered = self.admin_site.is_registered(RoutingExample)
        if not (registered and self.admin_site.get_model_admin(RoutingExample).has_add_permission(request)):
            return [(row, None) for row in recent]
        texts = {row.pk: " ".join(row.question.split())[:EXAMPLE_MAX_CHARS].strip() for row in recent}
        filed = dict(
            RoutingExample.objects.filter(text__in={text for text in texts.values() if text}).values_list(
                "text", "capability"
            )
        )
        rows: list[tuple[AgentRequest, Any]] = []
        for row in recent:
            text = texts[row.pk]
            if not text:
                rows.append((row, None))
            elif text in filed:
                rows.append((row, {"filed": filed[text]}))
            else:
                day = timezone.localdate(row.at, timezone.get_default_timezone())  # the site's day, as the page
                name = visible_name(row.agent, NOTE_MAX_CHARS - len(NOTE.format(agent="", day=day)), ellipsis="…")
                note = NOTE.format(agent=name, day=day)
                rows.append((row, {"url": f"{reverse(add)}?{urlencode({'text': text, 'note': note})}"}))
        return rows

    def export_view(self, request: HttpRequest) -> HttpResponse:
        if not may_view_insights(request):
            raise PermissionDenied
        form = RangeForm(request.GET or None)
        if request.GET and not form.is_valid():
            errors = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in form.errors.items())
            return HttpResponseBadRequest(f"Bad date range ({errors}).", content_type="text/plain; charset=utf-8")
        start, end = form.range()
        rows = TrafficRange(start, end).summary("day", *KEY_FIELDS)
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="agent-traffic-{start}-{end}.csv"'
        writer = csv.writer(response)
        header = ["day", *KEY_FIELDS, "requests", "tokens", "cached", "errors", "rate_limited", "p50_ms", "p95_ms"]
        writer.writerow(header)
        for row in rows:
            histogram = row["latency_histogram"]
            writer.writerow(
                [
                    row["day"].isoformat(),
                    *[neutralise(row[name]) for name in KEY_FIELDS],
                    *[row[name] for name in ("requests", "tokens", "cached", "errors", "rate_limited")],
                    percentile(histogram, 0.5),
                    percentile(histogram, 0.95),
                ]
            )
        return response


def safe_url(url: str) -> str | None:
    """A document's URL to link to: only web addresses and site paths (never ``javascript:``)."""
    return url if url.startswith(("https://", "http://", "/")) else None
