from __future__ import annotations

import datetime
from typing import Any

from django.conf import settings
from django.core.mail import mail_managers
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...insights.aggregation import site_today
from ...insights.summary import build_report, site_name, summary_text


class Command(BaseCommand):
    help = (
        "A summary of agent traffic over the last closed days (default 7, ending yesterday in the site's time zone): "
        "requests by protocol and outcome, top agents and capabilities, p50/p95 latency, tokens, 429s, open content "
        "gaps and pages never cited. On stdout, or with --email to settings.MANAGERS (on stdout if it cannot be "
        "mailed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=7, help="How many closed days (default 7).")
        parser.add_argument("--email", action="store_true", help="Mail it to settings.MANAGERS instead.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if not 1 <= days <= 366:
            raise CommandError("--days must be between 1 and 366.")
        end = site_today() - datetime.timedelta(days=1)
        start = end - datetime.timedelta(days=days - 1)
        text = summary_text(build_report(start, end))
        if not options["email"]:
            self.stdout.write(text, ending="")
            return
        if not settings.MANAGERS:
            raise CommandError("settings.MANAGERS is empty: nobody to mail the summary to.")
        try:
            mail_managers(f"Agent traffic on {site_name()}, {start} to {end}", text, fail_silently=False)
        except OSError as error:  # smtplib.SMTPException is one, as are refused connections, timeouts, TLS errors
            self.stdout.write(text, ending="")  # nothing lost: cron mails a command's output to its owner
            raise CommandError(
                f"The summary could not be mailed to settings.MANAGERS: {error or type(error).__name__}."
            ) from error
        self.stdout.write(f"Sent the summary of {start} to {end} to {len(settings.MANAGERS)} manager(s).")
