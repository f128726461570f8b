"""``manage.py agent_insights_aggregate``: what the ``agent_handshake.insights_daily`` beat task does, for cron.

Aggregates every closed day of agent traffic not aggregated yet (days end in the site's time zone), then deletes the
raw rows past ``INSIGHTS_RETENTION_DAYS`` whose days the aggregates count in full. Safe to run twice, or hourly.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ...conf import app_settings
from ...insights.aggregation import run_daily


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class Command(BaseCommand):
    help = (
        "Aggregate every closed day of agent traffic not aggregated yet, then delete the raw request records older "
        "than INSIGHTS_RETENTION_DAYS whose days are aggregated (the daily aggregates stay). What the "
        "agent_handshake.insights_daily beat task does; run it hourly or daily from cron."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        result = run_daily()
        days = result["aggregated"]
        if days:
            self.stdout.write(f"Aggregated {plural(len(days), 'closed day')} of agent traffic: {', '.join(days)}.")
        else:
            self.stdout.write("No closed day of agent traffic left to aggregate.")
        purged = result["purged"]
        self.stdout.write(
            f"Purged {plural(purged, 'raw request')} older than {app_settings.INSIGHTS_RETENTION_DAYS} days "
            f"(INSIGHTS_RETENTION_DAYS); the daily aggregates keep {'it' if purged == 1 else 'them'}."
        )
