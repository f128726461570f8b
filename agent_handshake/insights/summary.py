"""What owners read about agent traffic over a date range: the figures the admin overview shows and the weekly
summary mails (``manage.py agent_insights_summary``)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ..conf import app_settings
from ..models import ContentGap, Document, SiteProfile
from .aggregation import TrafficRange, format_latency, percentile

#: How many agents, capabilities, pages and gaps a list shows.
TOP = 10


@dataclass
class Report:
    """The figures of one date range (site days, both included)."""

    start: datetime.date
    end: datetime.date
    traffic: TrafficRange
    total: dict[str, Any]
    by_protocol: list[dict[str, Any]]
    by_outcome: list[dict[str, Any]]
    agents: list[dict[str, Any]]
    capabilities: list[dict[str, Any]]
    cited: list[tuple[Document, int]]
    never_cited: list[Document]
    never_cited_count: int
    documents: int
    gaps: list[ContentGap] = field(default_factory=list)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def p50(self) -> int | None:
        return percentile(self.total["latency_histogram"], 0.5)

    @property
    def p95(self) -> int | None:
        return percentile(self.total["latency_histogram"], 0.95)

    @property
    def p50_text(self) -> str:
        return format_latency(self.p50)

    @property
    def p95_text(self) -> str:
        return format_latency(self.p95)


def by_requests(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: (-row["requests"], [str(value) for value in row.values()]))


def build_report(start: datetime.date, end: datetime.date, top: int = TOP, never_cited_limit: int = 50) -> Report:
    traffic = TrafficRange(start, end)
    citations = traffic.citations()
    documents = Document.objects.only("pk", "title", "url", "path")
    cited_documents = documents.in_bulk(
        [pk for pk, _ in sorted(citations.items(), key=lambda item: -item[1])][: top * 2]
    )
    cited = sorted(
        ((cited_documents[pk], count) for pk, count in citations.items() if pk in cited_documents),
        key=lambda item: (-item[1], item[0].title),
    )[:top]
    uncited = documents.exclude(pk__in=list(citations)).order_by("title", "pk")
    agents, capabilities = by_requests(traffic.summary("agent"))[:top], by_requests(traffic.summary("capability"))[:top]
    for row in (*agents, *capabilities):
        row["p95_text"] = format_latency(percentile(row["latency_histogram"], 0.95))
    return Report(
        start=start,
        end=end,
        traffic=traffic,
        total=traffic.total(),
        by_protocol=by_requests(traffic.summary("protocol")),
        by_outcome=by_requests(traffic.summary("outcome")),
        agents=agents,
        capabilities=capabilities,
        cited=cited,
        never_cited=list(uncited[:never_cited_limit]),
        never_cited_count=uncited.count(),
        documents=documents.count(),
        gaps=list(ContentGap.objects.filter(status=ContentGap.Status.OPEN).order_by("-count", "-last_seen")[:top]),
    )


def site_name() -> str:
    return app_settings.SITE_NAME or SiteProfile.load().name or "this site"


def summary_text(report: Report) -> str:
    """The weekly summary as plain text (agent-sent names are plain text here: a mail, not HTML)."""
    total = report.total
    lines = [
        f"Agent traffic on {site_name()}: {report.start} to {report.end} ({report.days} days)",
        "",
        f"Requests: {total['requests']} (from the answer cache: {total['cached']})",
        f"Model tokens: {total['tokens']}",
        f"Rate limited (429): {total['rate_limited']}",
        f"Errors: {total['errors']}",
        f"Latency: p50 {report.p50_text}, p95 {report.p95_text} (to the histogram's bucket)",
        "",
        "By protocol:",
        *[f"  {row['protocol']}: {row['requests']}" for row in report.by_protocol],
        "By outcome:",
        *[f"  {row['outcome']}: {row['requests']}" for row in report.by_outcome],
        "",
        "Top agents:",
        *[
            f"  {row['agent']}: {row['requests']} (errors {row['errors']}, rate limited {row['rate_limited']})"
            for row in report.agents
        ],
        "Top capabilities:",
        *[f"  {row['capability'] or '(none: questions)'}: {row['requests']}" for row in report.capabilities],
        "",
        "Top open content gaps (questions nothing on the site answers):",
        *([f"  {gap.label} ({gap.count} questions)" for gap in report.gaps] or ["  (none)"]),
        "",
        "Most cited pages:",
        *([f"  {document.title}: {count} ({document.url})" for document, count in report.cited] or ["  (none)"]),
        f"Pages never cited ({report.never_cited_count} of {report.documents}):",
        *[f"  {document.title} ({document.url})" for document in report.never_cited[:20]],
    ]
    if report.never_cited_count > 20:
        lines.append(f"  ... and {report.never_cited_count - 20} more")
    return "\n".join(lines) + "\n"
