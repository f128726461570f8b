"""``manage.py agent_recover_jobs``: what the ``agent_handshake.recover_jobs`` beat task does, for cron.

Sends again the async jobs and callbacks whose Celery messages were lost (a worker killed on a broker that does
not redeliver), expires human-desk requests no one answered, and deletes finished jobs past their retention.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent_handshake.concierge.recovery import recover

#: The longest --older-than (ten years): beyond the calendar, the cutoff and the recovery backoff overflow.
MAX_OLDER_THAN = 10 * 365 * 24 * 3600


class Command(BaseCommand):
    help = "Re-send lost async jobs and callbacks, expire unanswered desk requests, purge old jobs."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--older-than",
            type=int,
            default=None,
            metavar="SECONDS",
            help="Treat unfinished jobs untouched this long as lost (default: the JOB_RECOVERY_SECONDS setting).",
        )

    def handle(self, *args: Any, older_than: int | None, **options: Any) -> None:
        if older_than is not None and not 0 <= older_than <= MAX_OLDER_THAN:
            raise CommandError(f"--older-than must be between 0 and {MAX_OLDER_THAN} seconds.")
        counts = recover(recovery_seconds=older_than)
        self.stdout.write(", ".join(f"{name.replace('_', ' ')}: {count}" for name, count in counts.items()))
