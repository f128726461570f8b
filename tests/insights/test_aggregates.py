"""Agent traffic insights: the daily aggregates against the raw rows they came from, retention, the range reader,
the daily task and the weekly summary. The raw rows are planted here (they are the aggregation's input); the
expected figures are computed from the planted rows by plain Python."""

from __future__ import annotations

import datetime
import math
import random
from collections import Counter
from dataclasses import dataclass
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from agent_handshake.insights import aggregation
from agent_handshake.insights.aggregation import TrafficRange, aggregate_day, percentile, purge, run_daily
from agent_handshake.models import AgentRequest, ContentGap, DailyCitation, DailyTraffic, Document
from agent_handshake.models.insights import LATENCY_BUCKETS_MS

pytestmark = pytest.mark.django_db

STATUS = {"success": 200, "clarification": 200, "no_answer": 200, "refused": 403, "rate_limited": 429, "error": 500}
HOSTILE_AGENT = "<script>alert('x')</script> bot"
FORMULA_AGENT = "=cmd|' /C calc'!A0"


@dataclass
class Planted:
    rows: list[AgentRequest]
    documents: list[Document]
    days: list[datetime.date]


def plant_documents(count: int = 4, prefix: str = "insights") -> list[Document]:
    kind = ContentType.objects.get_for_model(Document)
    return [
        Document.objects.create(
            content_type=kind,
            object_id=f"{prefix}-{n}",
            url=f"https://example.com/{prefix}/page-{n}/",
            path=f"/{prefix}/page-{n}/",
            title=f"Tea page {n}",
            content_hash="x",
        )
        for n in range(count)
    ]


def plant_traffic(today: datetime.date, documents: list[Document] | None = None, seed: int = 15) -> Planted:
    """Raw rows over the three days before ``today`` and ``today`` itself, at fixed times of day (site time zone):
    random protocols, outcomes, latencies over every bucket, tokens, cache hits and citations, and a few named
    agents: one with errors and 429s, one whose name is markup, one whose name is a spreadsheet formula. The last
    page of ``documents`` is never cited."""
    documents = plant_documents() if documents is None else documents
    citable = [document.pk for document in documents[:-1]]
    rng = random.Random(seed)
    days = [today - datetime.timedelta(days=n) for n in (3, 2, 1, 0)]
    rows = []
    for day_number, day in enumerate(days):
        start, _ = aggregation.day_bounds(day)
        count = 30 + 5 * day_number
        for n in range(count):
            outcome = rng.choice(["success"] * 5 + ["clarification", "no_answer", "refused", "rate_limited", "error"])
            rows.append(
                AgentRequest(
                    at=start + datetime.timedelta(minutes=17 + n * (1380 // count)),  # 00:17 .. 23:xx, inside the day
                    protocol=rng.choice(["ahp", "nlweb", "mcp"]),
                    capability=rng.choice(["", "search", "book_appointment", "check_inventory"]),
                    outcome=outcome,
                    status=STATUS[outcome],
                    latency_ms=rng.choice([1, 7, 18, 40, 90, 120, 260, 700, 2000, 9000, 45000]) + rng.randint(0, 3),
                    tokens=rng.choice([0, 0, 150, 420, 1200]),
                    cached=rng.random() < 0.2,
                    sources=rng.sample(citable, rng.randint(0, 2)) if outcome == "success" else [],
                    agent_kind=rng.choice(["did", "key", "anonymous"]),
                    agent=rng.choice(["Tea Finder", "LeafBot @ 203.0.113.0/24", "did:key:z6MkTea", HOSTILE_AGENT]),
                    question=f"question {n}",
                )
            )
        for minute, outcome in ((5, "error"), (6, "rate_limited"), (7, "rate_limited")):
            rows.append(
                AgentRequest(
                    at=start + datetime.timedelta(minutes=minute),
                    protocol="ahp",
                    capability="book_appointment",
                    outcome=outcome,
                    status=STATUS[outcome],
                    latency_ms=33,
                    tokens=0,
                    agent_kind="key",
                    agent="Tea Finder",
                    question="book a tasting",
                )
            )
        rows.append(
            AgentRequest(
                at=start + datetime.timedelta(minutes=9),
                protocol="mcp",
                capability="search",
                outcome="success",
                status=200,
                latency_ms=12,
                tokens=77,
                agent_kind="anonymous",
                agent=FORMULA_AGENT,
                sources=[citable[0]],
            )
        )
    AgentRequest.objects.bulk_create(rows)
    return Planted(rows, documents, days)


def expected(rows: list[AgentRequest], key) -> dict:
    """Requests, tokens and cache hits per ``key(row)``, counted in Python."""
    totals: dict = {}
    for row in rows:
        total = totals.setdefault(key(row), Counter())
        total["requests"] += 1
        total["tokens"] += row.tokens
        total["cached"] += row.cached
    return {name: dict(total) for name, total in totals.items()}


def stored(queryset, *fields) -> dict:
    totals: dict = {}
    for row in queryset:
        total = totals.setdefault(tuple(getattr(row, f) for f in fields), Counter())
        for name in ("requests", "tokens", "cached"):
            total[name] += getattr(row, name)
    return {(name[0] if len(name) == 1 else name): dict(total) for name, total in totals.items()}


def nearest_rank(latencies: list[int], fraction: float) -> int:
    ordered = sorted(latencies)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def bucket_of(latency: int) -> tuple[int, int]:
    """The (exclusive lower, inclusive upper) bound of the bucket a latency falls in."""
    lower = 0
    for bound in LATENCY_BUCKETS_MS:
        if latency <= bound:
            return lower, bound
        lower = bound
    return lower, aggregation.OVERFLOW_MS


TODAY = datetime.date(2024, 3, 13)
NOW = timezone.make_aware(datetime.datetime(2024, 3, 13, 12, 0), datetime.timezone.utc)


def test_aggregates_add_up_to_the_raw_rows():
    planted = plant_traffic(TODAY)
    result = run_daily(NOW)
    closed = [row for row in planted.rows if row.at.date() < TODAY]
    assert result["aggregated"] == [day.isoformat() for day in planted.days[:3]]  # today is not closed
    assert not DailyTraffic.objects.filter(day=TODAY).exists()

    aggregates = DailyTraffic.objects.all()
    assert stored(aggregates, "day") == expected(closed, lambda row: row.at.date())
    assert stored(aggregates, "day", "protocol") == expected(closed, lambda row: (row.at.date(), row.protocol))
    assert stored(aggregates, "day", "outcome") == expected(closed, lambda row: (row.at.date(), row.outcome))
    assert stored(aggregates, "agent") == expected(closed, lambda row: row.agent)
    assert stored(aggregates, "capability") == expected(closed, lambda row: row.capability)
    assert stored(aggregates, "agent_kind", "agent") == expected(closed, lambda row: (row.agent_kind, row.agent))
    for traffic in aggregates:
        latencies = [
            row.latency_ms for row in closed
            if (row.at.date(), row.protocol, row.capability, row.outcome, row.agent_kind, row.agent)
            == (traffic.day, traffic.protocol, traffic.capability, traffic.outcome, traffic.agent_kind, traffic.agent)
        ]  # fmt: skip
        buckets = Counter(bucket_of(latency)[1] for latency in latencies)
        upper = [*LATENCY_BUCKETS_MS, aggregation.OVERFLOW_MS]
        assert traffic.latency_histogram == [buckets.get(bound, 0) for bound in upper]

    citations = Counter((row.at.date(), document) for row in closed for document in row.sources)
    assert {(c.day, c.document_id): c.citations for c in DailyCitation.objects.all()} == dict(citations)
    assert not DailyCitation.objects.filter(document=planted.documents[-1]).exists()


def test_recomputing_a_day_replaces_its_rows():
    plant_traffic(TODAY)
    run_daily(NOW)
    before = sorted(DailyTraffic.objects.values_list("day", "protocol", "capability", "outcome", "agent", "requests"))
    citations = sorted(DailyCitation.objects.values_list("day", "document_id", "citations"))
    assert run_daily(NOW)["aggregated"] == []  # nothing left to do
    for day in (TODAY - datetime.timedelta(days=n) for n in (1, 2, 3)):
        aggregate_day(day)
    aggregate_day(TODAY - datetime.timedelta(days=1))
    after = sorted(DailyTraffic.objects.values_list("day", "protocol", "capability", "outcome", "agent", "requests"))
    assert after == before
    assert sorted(DailyCitation.objects.values_list("day", "document_id", "citations")) == citations


def test_a_late_row_for_a_closed_day_is_counted_at_the_next_run():
    plant_traffic(TODAY)
    run_daily(NOW)
    yesterday = TODAY - datetime.timedelta(days=1)
    start, _ = aggregation.day_bounds(yesterday)
    AgentRequest.objects.create(
        at=start + datetime.timedelta(hours=23, minutes=59), protocol="nlweb", outcome="success", status=200,
        latency_ms=3, agent_kind="anonymous", agent="late",
    )  # fmt: skip
    assert run_daily(NOW)["aggregated"] == [yesterday.isoformat()]
    assert DailyTraffic.objects.get(day=yesterday, agent="late").requests == 1


def test_percentiles_from_histograms_are_in_the_raw_percentiles_bucket():
    planted = plant_traffic(TODAY)
    run_daily(NOW)
    reader = TrafficRange(planted.days[0], TODAY)
    latencies = [row.latency_ms for row in planted.rows]
    histogram = reader.total()["latency_histogram"]
    assert sum(histogram) == len(planted.rows)
    for fraction in (0.5, 0.95, 0.99, 0.01):
        true = nearest_rank(latencies, fraction)
        lower, upper = bucket_of(true)
        assert percentile(histogram, fraction) == upper
        assert lower < true <= upper or upper == aggregation.OVERFLOW_MS
    assert percentile([0] * len(histogram), 0.5) is None


def test_the_range_reader_mixes_aggregates_and_todays_raw_rows():
    planted = plant_traffic(TODAY)
    run_daily(NOW)
    reader = TrafficRange(planted.days[0], TODAY)
    assert reader.raw_days == [TODAY]
    by_day = {row["day"]: row for row in reader.summary("day")}
    counted = expected(planted.rows, lambda row: row.at.date())
    assert {day: {k: row[k] for k in ("requests", "tokens", "cached")} for day, row in by_day.items()} == counted
    by_outcome = {row["outcome"]: row["requests"] for row in reader.summary("outcome")}
    assert by_outcome == dict(Counter(row.outcome for row in planted.rows))
    total = reader.total()
    assert total["requests"] == len(planted.rows)
    assert total["rate_limited"] == sum(row.outcome == "rate_limited" for row in planted.rows)
    assert total["errors"] == sum(row.outcome == "error" for row in planted.rows)
    assert reader.citations() == dict(Counter(document for row in planted.rows for document in row.sources))

    # One agent's range, and a day not aggregated yet (yesterday's aggregates gone) read from its raw rows.
    DailyTraffic.objects.filter(day=planted.days[2]).delete()
    finder = TrafficRange(planted.days[0], TODAY, agent="Tea Finder")
    assert finder.raw_days == [planted.days[2], TODAY]
    mine = [row for row in planted.rows if row.agent == "Tea Finder"]
    assert finder.total()["requests"] == len(mine)
    assert {row["capability"]: row["requests"] for row in finder.summary("capability")} == dict(
        Counter(row.capability for row in mine)
    )


def test_raw_rows_are_purged_after_retention_only_once_aggregated():
    planted = plant_traffic(TODAY)
    later = TODAY + datetime.timedelta(days=1)  # kept: the 2 days before ``later`` and ``later``; purged: 10th, 11th
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "INSIGHTS_RETENTION_DAYS": 2}):
        assert purge(later) == 0  # nothing aggregated yet: nothing lost
        assert AgentRequest.objects.count() == len(planted.rows)
        result = run_daily(timezone.make_aware(datetime.datetime.combine(later, datetime.time(1))))
    old_days = planted.days[:2]
    old = [row for row in planted.rows if row.at.date() in old_days]
    assert result["purged"] == len(old)
    remaining = AgentRequest.objects.all()
    assert remaining.count() == len(planted.rows) - len(old)
    assert min(aggregation.site_today(row.at) for row in remaining) == planted.days[2]
    # The aggregates of the purged days stay, and a reader still sees all the traffic.
    assert stored(DailyTraffic.objects.filter(day__in=old_days), "day") == expected(old, lambda row: row.at.date())
    assert TrafficRange(planted.days[0], later).total()["requests"] == len(planted.rows)
    assert run_daily(NOW)["aggregated"] == []  # a purged day is not "re-aggregated" into nothing


@override_settings(TIME_ZONE="America/Los_Angeles")
def test_days_are_the_sites_days():
    late_evening = timezone.make_aware(datetime.datetime(2024, 3, 11, 23, 30), timezone.get_default_timezone())
    AgentRequest.objects.create(
        at=late_evening, protocol="ahp", outcome="success", status=200, latency_ms=3, agent_kind="key", agent="a"
    )
    # 07:30 UTC on the 12th, but the 11th in Portland: aggregated as the 11th once the 12th begins there.
    run_daily(timezone.make_aware(datetime.datetime(2024, 3, 12, 0, 30), timezone.get_default_timezone()))
    assert list(DailyTraffic.objects.values_list("day", flat=True)) == [datetime.date(2024, 3, 11)]


def test_the_daily_task_aggregates():
    from agent_handshake.tasks import insights_daily

    planted = plant_traffic(aggregation.site_today())
    result = insights_daily.apply().get()
    assert result["aggregated"] == [day.isoformat() for day in planted.days[:3]]
    assert DailyTraffic.objects.filter(day=planted.days[0]).exists()


def test_the_weekly_summary_on_stdout():
    planted = plant_traffic(aggregation.site_today())
    ContentGap.objects.create(
        label="Do you ship to Canada?", count=7, first_seen=timezone.now(), last_seen=timezone.now()
    )
    ContentGap.objects.create(
        label="closed one", count=99, status="dismissed", first_seen=timezone.now(), last_seen=timezone.now()
    )
    out = StringIO()
    call_command("agent_insights_summary", stdout=out)
    text = out.getvalue()
    closed = [row for row in planted.rows if row.at.date() < planted.days[-1]]  # closed days only: not today
    assert f"Requests: {len(closed)} " in text
    rate_limited = sum(row.outcome == "rate_limited" for row in closed)
    assert f"Rate limited (429): {rate_limited}\n" in text
    assert f"Model tokens: {sum(row.tokens for row in closed)}\n" in text
    finder = sum(row.agent == "Tea Finder" for row in closed)
    assert f"Tea Finder: {finder} " in text
    assert "Do you ship to Canada? (7 questions)" in text
    assert "closed one" not in text
    assert "Tea page 3" in text  # never cited
    for name, fraction in (("p50", 0.5), ("p95", 0.95)):
        upper = bucket_of(nearest_rank([row.latency_ms for row in closed], fraction))[1]
        assert f"{name} {'> 30000' if upper == aggregation.OVERFLOW_MS else f'≤ {upper}'} ms" in text


def test_the_weekly_summary_by_email(mailoutbox, settings):
    settings.MANAGERS = [("Owner", "owner@example.com")]
    planted = plant_traffic(aggregation.site_today())
    out = StringIO()
    call_command("agent_insights_summary", "--email", "--days", "2", stdout=out)
    assert len(mailoutbox) == 1
    message = mailoutbox[0]
    assert message.to == ["owner@example.com"]
    assert "Agent traffic" in message.subject
    two_days = [row for row in planted.rows if planted.days[1] <= row.at.date() < planted.days[-1]]
    assert f"Requests: {len(two_days)} " in message.body
    assert f"{planted.days[1]} to {planted.days[2]}" in message.subject
    assert out.getvalue().startswith("Sent the summary")


def test_the_weekly_summary_rejects_a_bad_day_count():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("agent_insights_summary", "--days", "0", stdout=StringIO())
