"""Daily aggregates of the raw agent requests, the retention purge, and reading any date range.

Days are the site's days: calendar days in ``settings.TIME_ZONE`` (with ``USE_TZ``; without it, of the naive local
times stored), because owners read "requests on Tuesday" in their own time. A day is *closed* once it has ended
there; ``run_daily`` aggregates every closed day whose raw rows are not all counted in its aggregates yet, then
deletes the raw rows of the days older than ``INSIGHTS_RETENTION_DAYS`` whose aggregates count every one of them (a
day that was not aggregated is never purged). Each day is (re)computed in one transaction that replaces its rows,
so running it twice changes nothing.

Readers (:class:`TrafficRange`) take closed, aggregated days from :class:`DailyTraffic` and every other day (today,
or a closed day not aggregated yet) from the raw rows with the same grouping, so pages are current.

Latency percentiles come from the summed histograms (:data:`LATENCY_BUCKETS_MS`): they are bucket-accurate, i.e.
the true percentile lies in the bucket whose upper bound is reported.
"""

from __future__ import annotations

import datetime
import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Func, IntegerField, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from ..conf import app_settings
from ..models import AgentRequest, DailyCitation, DailyTraffic, Document
from ..models.insights import LATENCY_BUCKETS_MS, Outcome

logger = logging.getLogger(__name__)

#: The grouping of a daily aggregate (besides the day).
KEY_FIELDS = ("protocol", "capability", "outcome", "agent_kind", "agent")
#: What every summary row carries.
METRICS = ("requests", "tokens", "cached", "errors", "rate_limited")
BUCKETS = len(LATENCY_BUCKETS_MS) + 1
#: What :func:`percentile` reports for a percentile in the overflow bucket (slower than the last bound).
OVERFLOW_MS = LATENCY_BUCKETS_MS[-1] + 1
#: An arbitrary, fixed first key for the advisory lock that serialises the aggregation of one day.
LOCK_KEY = 0x41485F49  # "AH_I"


# --- days --------------------------------------------------------------------------------------------------------


def site_today(now: datetime.datetime | None = None) -> datetime.date:
    now = now or timezone.now()
    if timezone.is_naive(now):  # USE_TZ = False: datetimes are already the site's local time
        return now.date()
    return timezone.localdate(now, timezone.get_default_timezone())


def day_bounds(day: datetime.date) -> tuple[datetime.datetime, datetime.datetime]:
    """The first instant of ``day`` in the site's time zone and of the day after (DST days are 23 or 25 hours);
    naive local midnights without ``USE_TZ``, as the rows' times are."""
    start = datetime.datetime.combine(day, datetime.time.min)
    end = datetime.datetime.combine(day + datetime.timedelta(days=1), datetime.time.min)
    if not settings.USE_TZ:
        return start, end
    zone = timezone.get_default_timezone()
    return timezone.make_aware(start, zone), timezone.make_aware(end, zone)


def site_day() -> TruncDate:
    """The raw row's day in the site's time zone, as SQL."""
    return TruncDate("at", tzinfo=timezone.get_default_timezone())


def raw_counts(start: datetime.date | None, end: datetime.date, agent: str | None = None) -> dict[datetime.date, int]:
    """Raw rows per day from ``start`` (None: the oldest) to ``end``, both included."""
    rows = AgentRequest.objects.filter(at__lt=day_bounds(end)[1])
    if start is not None:
        rows = rows.filter(at__gte=day_bounds(start)[0])
    if agent is not None:
        rows = rows.filter(agent=agent)
    return dict(rows.annotate(day=site_day()).values("day").annotate(n=Count("pk")).values_list("day", "n"))


def aggregated_counts(
    start: datetime.date | None, end: datetime.date, agent: str | None = None
) -> dict[datetime.date, int]:
    """Requests counted in the aggregates per day, from ``start`` (None: the oldest) to ``end``."""
    rows = DailyTraffic.objects.filter(day__lte=end)
    if start is not None:
        rows = rows.filter(day__gte=start)
    if agent is not None:
        rows = rows.filter(agent=agent)
    return dict(rows.values("day").annotate(n=Sum("requests")).values_list("day", "n"))


# --- metrics -----------------------------------------------------------------------------------------------------


def bucket_filter(index: int) -> Q:
    """Latencies in bucket ``index``: above the previous bound, up to and including this one (the last: above all)."""
    low = LATENCY_BUCKETS_MS[index - 1] if index > 0 else None
    if index == len(LATENCY_BUCKETS_MS):
        return Q(latency_ms__gt=low)
    q = Q(latency_ms__lte=LATENCY_BUCKETS_MS[index])
    return q & Q(latency_ms__gt=low) if low is not None else q


# The annotations are named apart from the model's fields (``requests``...): :func:`tidy` names them back.


def raw_metrics() -> dict[str, Any]:
    return {
        "n_requests": Count("pk"),
        "n_tokens": Sum("tokens"),
        "n_cached": Count("pk", filter=Q(cached=True)),
        "n_errors": Count("pk", filter=Q(outcome=Outcome.ERROR)),
        "n_rate_limited": Count("pk", filter=Q(outcome=Outcome.RATE_LIMITED)),
        **{f"h{index}": Count("pk", filter=bucket_filter(index)) for index in range(BUCKETS)},
    }


def aggregate_metrics() -> dict[str, Any]:
    return {
        "n_requests": Sum("requests"),
        "n_tokens": Sum("tokens"),
        "n_cached": Sum("cached"),
        "n_errors": Sum("requests", filter=Q(outcome=Outcome.ERROR)),
        "n_rate_limited": Sum("requests", filter=Q(outcome=Outcome.RATE_LIMITED)),
        # ArrayField indexes are 0-based in the ORM.
        **{f"h{index}": Sum(f"latency_histogram__{index}") for index in range(BUCKETS)},
    }


def tidy(row: dict[str, Any]) -> dict[str, Any]:
    """A summary row with its histogram as one list and no None (SQL's sum of nothing)."""
    histogram = [row.pop(f"h{index}") or 0 for index in range(BUCKETS)]
    for name in METRICS:
        row[name] = row.pop(f"n_{name}", None) or 0
    row["latency_histogram"] = histogram
    return row


def percentile(histogram: Sequence[int], fraction: float) -> int | None:
    """The nearest-rank percentile (``fraction`` 0.5 for p50) of a latency histogram: the upper bound (ms) of the
    bucket it falls in (:data:`OVERFLOW_MS` for the overflow bucket); None when there are no requests."""
    total = sum(histogram)
    if not total:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for index, count in enumerate(histogram):
        seen += count
        if seen >= rank:
            return LATENCY_BUCKETS_MS[index] if index < len(LATENCY_BUCKETS_MS) else OVERFLOW_MS
    return OVERFLOW_MS  # pragma: no cover - the loop always reaches the rank


def format_latency(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms > LATENCY_BUCKETS_MS[-1]:
        return f"> {LATENCY_BUCKETS_MS[-1]} ms"
    return f"≤ {ms} ms"


def add_histograms(histograms: Iterable[Sequence[int]]) -> list[int]:
    total = [0] * BUCKETS
    for histogram in histograms:
        for index, count in enumerate(histogram):
            total[index] += count
    return total


# --- aggregating and purging -------------------------------------------------------------------------------------


def unnest_sources() -> Func:
    return Func(F("sources"), function="unnest", output_field=IntegerField())


def aggregate_day(day: datetime.date) -> int:
    """(Re)compute ``day``'s :class:`DailyTraffic` and :class:`DailyCitation` rows from its raw rows, replacing what
    was there, in one transaction. Returns the number of raw rows counted."""
    start, end = day_bounds(day)
    raw = AgentRequest.objects.filter(at__gte=start, at__lt=end)
    with transaction.atomic():
        with connection.cursor() as cursor:  # two runs at once (beat overlapping a manual run) take turns
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_KEY, day.toordinal()])
        groups = [tidy(row) for row in raw.values(*KEY_FIELDS).annotate(**raw_metrics()).order_by()]
        cited = dict(
            raw.annotate(document_id=unnest_sources())
            .values("document_id")
            .annotate(citations=Count("*"))
            .order_by()
            .values_list("document_id", "citations")
        )
        existing = set(Document.objects.filter(pk__in=list(cited)).values_list("pk", flat=True))
        DailyTraffic.objects.filter(day=day).delete()
        DailyCitation.objects.filter(day=day).delete()
        DailyTraffic.objects.bulk_create(
            DailyTraffic(
                day=day,
                **{name: group[name] for name in KEY_FIELDS},
                requests=group["requests"],
                tokens=group["tokens"],
                cached=group["cached"],
                latency_histogram=group["latency_histogram"],
            )
            for group in groups
        )
        DailyCitation.objects.bulk_create(
            DailyCitation(day=day, document_id=document_id, citations=count)
            for document_id, count in cited.items()
            if document_id in existing  # a page deleted since: its citations have nothing to point to
        )
    return sum(group["requests"] for group in groups)


def days_to_aggregate(today: datetime.date) -> list[datetime.date]:
    """Closed days (before ``today``) with raw rows that their aggregates do not all count yet."""
    yesterday = today - datetime.timedelta(days=1)
    raw = raw_counts(None, yesterday)
    counted = aggregated_counts(min(raw), yesterday) if raw else {}
    return sorted(day for day, count in raw.items() if count > counted.get(day, 0))


def purge(today: datetime.date | None = None) -> int:
    """Delete the raw rows of the days older than ``INSIGHTS_RETENTION_DAYS`` whose aggregates count every one of
    them; the aggregates stay. Returns the number of rows deleted."""
    today = today or site_today()
    oldest_kept = today - datetime.timedelta(days=app_settings.INSIGHTS_RETENTION_DAYS)
    last = oldest_kept - datetime.timedelta(days=1)
    raw = raw_counts(None, last)
    if not raw:
        return 0
    counted = aggregated_counts(min(raw), last)
    deleted = 0
    for day, count in sorted(raw.items()):
        if counted.get(day, 0) != count:
            logger.warning("Agent insights: %s is past retention but not aggregated; its raw rows are kept.", day)
            continue
        start, end = day_bounds(day)
        deleted += AgentRequest.objects.filter(at__gte=start, at__lt=end).delete()[0]
    return deleted


def run_daily(now: datetime.datetime | None = None) -> dict[str, Any]:
    """Aggregate every closed day not aggregated yet, then purge the raw rows past retention (the daily task)."""
    today = site_today(now)
    days = days_to_aggregate(today)
    for day in days:
        aggregate_day(day)
    return {"aggregated": [day.isoformat() for day in days], "purged": purge(today)}


# --- reading a range ---------------------------------------------------------------------------------------------


class TrafficRange:
    """Agent traffic from ``start`` to ``end`` (site days, both included), optionally of one agent: aggregated days
    from the aggregates, the others (today, days not aggregated yet) from the raw rows."""

    def __init__(
        self, start: datetime.date, end: datetime.date, agent: str | None = None, today: datetime.date | None = None
    ) -> None:
        self.start, self.end, self.agent = start, end, agent
        raw = raw_counts(start, end, agent)
        counted = aggregated_counts(start, end, agent)
        self.raw_days = sorted(day for day, count in raw.items() if count > counted.get(day, 0))

    @property
    def days(self) -> list[datetime.date]:
        return [self.start + datetime.timedelta(days=n) for n in range((self.end - self.start).days + 1)]

    def raw_rows(self) -> QuerySet[AgentRequest]:
        if not self.raw_days:
            return AgentRequest.objects.none().annotate(day=site_day())
        rows = AgentRequest.objects.filter(
            at__gte=day_bounds(self.raw_days[0])[0], at__lt=day_bounds(self.raw_days[-1])[1]
        ).annotate(day=site_day())
        rows = rows.filter(day__in=self.raw_days)
        return rows.filter(agent=self.agent) if self.agent is not None else rows

    def aggregate_rows(self, model: type = DailyTraffic) -> QuerySet[Any]:
        rows = model.objects.filter(day__gte=self.start, day__lte=self.end).exclude(day__in=self.raw_days)
        if self.agent is not None and model is DailyTraffic:
            rows = rows.filter(agent=self.agent)
        return rows

    def summary(self, *dimensions: str, **filters: Any) -> list[dict[str, Any]]:
        """Rows grouped by ``dimensions`` (any of ``day`` and :data:`KEY_FIELDS`; none: one total row) with
        :data:`METRICS` and the summed ``latency_histogram``, ordered by the dimensions."""
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        aggregated, raw = self.aggregate_rows().filter(**filters), self.raw_rows().filter(**filters)
        if dimensions:
            sources: Any = (
                aggregated.values(*dimensions).annotate(**aggregate_metrics()).order_by(),
                raw.values(*dimensions).annotate(**raw_metrics()).order_by(),
            )
        else:  # one total row each
            sources = ([aggregated.aggregate(**aggregate_metrics())], [raw.aggregate(**raw_metrics())])
        for source in sources:
            for row in source:
                row = tidy(row)
                key = tuple(row[name] for name in dimensions)
                if key not in merged:
                    merged[key] = row
                    continue
                total = merged[key]
                for name in METRICS:
                    total[name] += row[name]
                total["latency_histogram"] = add_histograms([total["latency_histogram"], row["latency_histogram"]])
        rows = [row for key, row in sorted(merged.items(), key=lambda item: [str(v) for v in item[0]])]
        if not dimensions and not rows:
            rows = [tidy({f"h{index}": 0 for index in range(BUCKETS)})]
        return [row for row in rows if row["requests"] or not dimensions]

    def total(self) -> dict[str, Any]:
        return self.summary()[0]

    def citations(self) -> dict[int, int]:
        """Citations per document pk in the range (all agents)."""
        counts: dict[int, int] = {}
        aggregated = self.aggregate_rows(DailyCitation).values("document_id").annotate(n=Sum("citations")).order_by()
        for document_id, n in aggregated.values_list("document_id", "n"):
            counts[document_id] = counts.get(document_id, 0) + n
        raw = (
            self.raw_rows()
            .annotate(document_id=unnest_sources())
            .values("document_id")
            .annotate(n=Count("*"))
            .order_by()
            .values_list("document_id", "n")
        )
        for document_id, n in raw:
            counts[document_id] = counts.get(document_id, 0) + n
        return counts
