"""Serve the demo: the Django development server, a Celery worker and Celery beat, until Ctrl-C.

All three run as child processes of this one; Ctrl-C, SIGTERM or SIGHUP (a closed terminal) stops them, waits for
them, and the embedded PostgreSQL stops with its last user. Sent to the whole process group (``docker stop``,
systemd), the signals reach the children too: runserver then exits normally through agent_handshake.embedded's
handler, Celery through its own.

Beat is a process of its own rather than the worker's ``--beat``: that one is a fork of the worker, which a worker
stopped while it forks (runserver failing at once on a port in use) leaves running, holding the terminal's output
and the embedded server. Only a process started here is one this command can wait for, and kill when it will not stop.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from demo_site.pages.demo_key import curl_examples, demo_secret


class Command(BaseCommand):
    help = "Run the demo site: runserver on 127.0.0.1:PORT, a Celery worker and Celery beat, until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))

    def handle(self, *args, port, **options):
        base = settings.BASE_DIR
        # Beat's schedule goes where the settings keep the demo's queue (AGENT_HANDSHAKE_QUEUE_DIR).
        schedule = Path(settings.CELERY_BEAT_SCHEDULE_FILENAME)
        schedule.parent.mkdir(parents=True, exist_ok=True)
        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, name):  # no SIGHUP on Windows
                signal.signal(getattr(signal, name), stop)
        celery = [sys.executable, "-m", "celery", "-A", "demo_site"]
        children = {
            "worker": subprocess.Popen(
                [*celery, "worker", "--pool", "threads", "--concurrency", "2", "--loglevel", "INFO"], cwd=base
            ),
            "beat": subprocess.Popen(
                [*celery, "beat", "--schedule", str(schedule), "--loglevel", "INFO"], cwd=base
            ),
            "web": subprocess.Popen(
                [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=base
            ),
        }  # fmt: skip
        try:  # whatever happens from here on (an error in the banner too), the children are stopped
            self.stdout.write(self.style.SUCCESS(f"\nLantern & Kettle is starting on http://127.0.0.1:{port}/"))
            self.stdout.write(
                f"  manifest:  curl -s http://127.0.0.1:{port}/.well-known/agent.json\n"
                f"  llms.txt:  curl -s http://127.0.0.1:{port}/llms.txt\n"
                f"  ask:       curl -s -X POST http://127.0.0.1:{port}/agent/converse "
                "-H 'Content-Type: application/json' "
                """-d '{"capability": "content_search", "query": "How hot should the water be for gyokuro?"}'\n"""
                f"  admin:     http://127.0.0.1:{port}/admin/ (admin / admin)\n"
            )
            secret = demo_secret()
            if secret:
                self.stdout.write(
                    f"MODE3 demo API key (DEBUG only, every scope): {secret}\n"
                    + curl_examples(f"http://127.0.0.1:{port}", secret)
                    + "\n"
                )
            self.stdout.write("Ctrl-C stops everything.\n")
            while not stopping and all(child.poll() is None for child in children.values()):
                time.sleep(0.3)
            # A child that stopped before we asked it to (runserver on a port in use) failed, whatever its code.
            exited = [] if stopping else [name for name, child in children.items() if child.poll() is not None]
        finally:
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)  # a clean exit, so the embedded server is released
            deadline = time.monotonic() + 20
            for name, child in children.items():
                try:
                    child.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.stderr.write(f"{name} did not stop; killing it")
                    child.kill()
                    child.wait()
        if exited:
            raise CommandError(f"Stopped because {', '.join(exited)} exited.")
