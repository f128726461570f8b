"""``manage.py agent_update_gaps``: what the ``agent_handshake.update_content_gaps`` beat task does, for cron.

Groups the recorded questions agents got no answer (or only weak matches) for into content gaps, at most
``INSIGHTS_GAP_BATCH`` per batch; ``--batches`` runs more than one batch when many questions wait (a cron job that
runs less often than hourly).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...conf import app_settings
from ...insights.gaps import update_gaps, waiting
from ...retrieval.embeddings import EmbeddingUnavailable

#: The most batches one run may take: a bound on how long it can hold the gaps' lock (one batch at a time).
MAX_BATCHES = 100_000


def questions(count: int) -> str:
    return f"{count} question{'' if count == 1 else 's'}"


class Command(BaseCommand):
    help = (
        "Group the recorded questions agents got no answer (or only weak matches) for into content gaps, "
        "INSIGHTS_GAP_BATCH at a time. What the agent_handshake.update_content_gaps beat task does; run it hourly "
        "from cron. Needs INSIGHTS_RECORD_QUESTIONS (only a question's text can be grouped)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batches",
            type=int,
            default=1,
            help=f"Run up to this many batches, stopping when no question waits (1 to {MAX_BATCHES}, default 1).",
        )

    def handle(self, *args: Any, batches: int = 1, **options: Any) -> None:
        if not 1 <= batches <= MAX_BATCHES:
            raise CommandError(f"--batches must be between 1 and {MAX_BATCHES}.")
        if not app_settings.INSIGHTS_RECORD_QUESTIONS:
            self.stdout.write(
                "INSIGHTS_RECORD_QUESTIONS is off: no new question is recorded, so only those recorded before can "
                "be grouped."
            )
        grouped = 0
        for _ in range(batches):
            if not waiting().exists():
                break
            try:
                done = update_gaps()
            except EmbeddingUnavailable as exc:
                raise CommandError(
                    f"{exc} {questions(grouped)} grouped before it; the others wait for the next run."
                ) from exc
            if not done:
                # Questions wait, yet the run took none: another run (the beat task, an earlier cron job) holds the
                # lock and is grouping them.
                left = questions(waiting().count())
                self.stdout.write(f"Another run is grouping questions now; {left} waiting for it or the next run.")
                break
            grouped += done
        left = waiting().count()
        if not grouped and not left:
            self.stdout.write("No unanswered question waiting to be grouped.")
        elif grouped:
            waiting_text = (
                f"{questions(left)} still waiting (INSIGHTS_GAP_BATCH is {app_settings.INSIGHTS_GAP_BATCH}; "
                "run it again, or with --batches)"
                if left
                else "none waiting"
            )
            self.stdout.write(f"Grouped {questions(grouped)} into content gaps; {waiting_text}.")
