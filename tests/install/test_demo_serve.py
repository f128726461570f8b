"""``manage.py demo_serve`` (``make demo``) as a user runs it: where it keeps its files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_serve_keeps_beats_schedule_in_the_queue_directory(transactional_db, tmp_path):
    """Two demos, or a read-only checkout, each with its own AGENT_HANDSHAKE_QUEUE_DIR: Celery beat's schedule file
    is kept there too, not in the checkout's .queue/ that every demo shares."""
    db = connection.settings_dict  # the test database, migrated: demo_serve reads its API key at start
    queue = tmp_path / "queue"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="demo_site.settings",
        AGENT_HANDSHAKE_QUEUE_DIR=str(queue),
        DATABASE_URL=f"postgres://{db['USER']}@{quote(db['HOST'], safe='')}:{db['PORT'] or 5432}/{db['NAME']}",
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "demo.log"
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo_serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(queue.glob("celerybeat-schedule*")):
            assert demo.poll() is None, f"the demo exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no beat schedule in {queue}: {sorted(queue.iterdir())}"
            time.sleep(0.3)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGTERM)
        try:
            demo.wait(30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(demo.pid, signal.SIGKILL)
