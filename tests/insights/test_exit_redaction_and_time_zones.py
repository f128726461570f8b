"""Agent traffic insights: what a process loses at exit, what redaction leaves in a stored question, and a site
without time zone support.

The exit test runs a real Python process with a writer thread on the test database (outside the tests' transactions,
like the live servers of ``test_recording.py``) and holds a lock on the table so that its writer is caught in the middle
of a write when the process exits.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import textwrap
import time
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse

from agent_handshake.insights.aggregation import run_daily
from agent_handshake.insights.redaction import redact
from agent_handshake.models import AgentRequest, DailyTraffic

ROOT = Path(__file__).resolve().parents[2]

EXITING = textwrap.dedent(
    """
    import sys, time
    import django
    django.setup()
    from agent_handshake.insights import recording
    for _ in range(50):
        record = recording.begin("ahp", "content_search")
        recording.note(requesting_agent="exit-test")
        record.settle(200, agent_kind="anonymous", address="192.0.2.1")
        recording.finish(record)
    deadline = time.monotonic() + 30
    while recording.pending() and time.monotonic() < deadline:  # the writer thread has taken them
        time.sleep(0.01)
    print("taken", flush=True)
    sys.stdin.readline()
    sys.exit(0)  # a normal exit: a gunicorn worker restarted, a server stopped
    """
)


@pytest.mark.slow
def test_a_write_under_way_when_the_process_exits_is_finished_not_lost(transactional_db):
    """The writer thread has taken the records and its insert waits (here: for a lock) when the process exits
    normally: the exit waits for that write instead of killing the thread with its records."""
    if True:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],
            "AGENT_HANDSHAKE_INSIGHTS_FLUSH_SECONDS": "0.2",
        }
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:  # inserts wait until this transaction ends
                    cursor.execute(f"LOCK TABLE {AgentRequest._meta.db_table} IN EXCLUSIVE MODE")
                process = subprocess.Popen(
                    [sys.executable, "-c", EXITING], cwd=ROOT, env=env, text=True,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                )  # fmt: skip
                assert process.stdout.readline().strip() == "taken"
                process.stdin.write("\n")
                process.stdin.flush()
                time.sleep(1.5)  # the process is exiting (or, without the fix, gone)
            _, errors = process.communicate(timeout=30)
            assert process.returncode == 0, errors
            assert AgentRequest.objects.filter(agent="exit-test @ 192.0.2.0/24").count() == 50
        finally:
            AgentRequest.objects.filter(agent="exit-test @ 192.0.2.0/24").delete()


# --- redaction: secrets ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my key is sk-proj-aB3dE5fG7hJ9kL1mN3oP5qR7sT9uV1wX3yZ, why 401?", "my key is [secret], why 401?"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
            ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "Authorization: Bearer [secret]",
        ),
        ("token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 works?", "token [secret] works?"),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [secret]"),
        ("session 5d41402abc4b2a76b9719d911017c592", "session [secret]"),
        ("reset link https://shop.example/reset/Zk3pQ9vX2mL7rT4wY8nB1cD6 expired", "reset link https:[secret] expired"),
        # Kept: long words, slugs, SKUs and model numbers are not secrets.
        ("Donaudampfschifffahrtsgesellschaftskapitän tea", "Donaudampfschifffahrtsgesellschaftskapitän tea"),
        ("see /products/organic-green-tea-2024-edition", "see /products/organic-green-tea-2024-edition"),
        ("LK-TEA-0001 or AKIAIOSFODNN7EXAMPLE?", "LK-TEA-0001 or AKIAIOSFODNN7EXAMPLE?"),
        ("IBAN FR7630006000011234567890189", "IBAN FR[number]"),
    ],
)
def test_tokens_and_keys_in_a_question_are_not_stored(text, expected):
    assert redact(text) == expected


# --- a site without time zone support -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_site_without_time_zone_support_gets_its_aggregates_pages_and_summary(client, settings):
    """With ``USE_TZ = False`` (datetimes are the site's local time, naive) the daily task, the overview and the weekly
    summary raised ValueError (localtime() of a naive datetime): nothing was aggregated, nor purged after retention."""
    settings.USE_TZ = False
    now = datetime.datetime.now()
    yesterday = now.date() - datetime.timedelta(days=1)
    common = {"protocol": "ahp", "outcome": "success", "status": 200, "latency_ms": 12, "agent_kind": "anonymous"}
    AgentRequest.objects.create(at=datetime.datetime.combine(yesterday, datetime.time(23, 30)), agent="late", **common)
    AgentRequest.objects.create(at=datetime.datetime.combine(now.date(), datetime.time(0, 0)), agent="today", **common)
    AgentRequest.objects.create(at=datetime.datetime.combine(yesterday, datetime.time(0, 0)), agent="early", **common)
    AgentRequest.objects.create(at=now - datetime.timedelta(days=40), agent="old", **common)

    assert run_daily()["aggregated"] == [(now - datetime.timedelta(days=40)).date().isoformat(), yesterday.isoformat()]
    assert dict(DailyTraffic.objects.values_list("agent", "day")) == {
        "old": (now - datetime.timedelta(days=40)).date(), "late": yesterday, "early": yesterday,
    }  # fmt: skip
    assert sorted(AgentRequest.objects.values_list("agent", flat=True)) == ["early", "late", "today"]  # "old": purged

    client.force_login(User.objects.create_superuser("root", password="pw"))
    overview = client.get(reverse("admin:agent_handshake_agentrequest_changelist"))
    assert overview.status_code == 200
    assert 'id="total-requests">3<' in overview.content.decode()  # the last 14 days: yesterday's two, today's one
    out = StringIO()
    call_command("agent_insights_summary", "--days", "1", stdout=out)
    assert "Requests: 2 " in out.getvalue()
