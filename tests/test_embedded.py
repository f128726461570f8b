"""The embedded PostgreSQL default and the DATABASE_URL switch."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_handshake.embedded import database_config


@pytest.mark.django_db
def test_tests_run_on_postgresql_with_pgvector():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
        cursor.execute("SHOW server_version_num")
        (server_version,) = cursor.fetchone()
    assert tuple(int(part) for part in version.split(".")[:2]) >= (0, 5)
    assert int(server_version) >= 150000


def test_database_url_wins_over_the_embedded_server(tmp_path):
    config = database_config(tmp_path, env={"DATABASE_URL": "postgres://u:p@db.internal:6543/site"})
    assert (config["ENGINE"], config["NAME"], config["HOST"], config["PORT"]) == (
        "django.db.backends.postgresql",
        "site",
        "db.internal",
        6543,
    )
    assert not (tmp_path / ".pgdata").exists()


def test_processes_that_died_are_forgotten(tmp_path):
    """A killed process must not keep the embedded server running for good (see embedded.py)."""
    import json
    import os
    import subprocess
    import sys

    from agent_handshake.embedded import _forget_dead_processes

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([dead.pid, os.getpid()]))
    _forget_dead_processes(tmp_path)
    assert json.loads(handles.read_text()) == [os.getpid()]
