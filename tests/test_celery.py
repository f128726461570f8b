"""Live re-indexing through a real Celery worker process, on each broker this machine offers.

A separate process saves a registered object (so the save, the on-commit hook and the publish are the real
ones), a real worker (``celery -A demo_site worker``) consumes the task, and the test reads the database. The
embedded default broker (kombu's filesystem transport) always runs; Redis and RabbitMQ run when they answer on
127.0.0.1, and are reported as skipped, with the reason, when they do not.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from agent_handshake.models import Document, Passage

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


BROKERS = [
    pytest.param("filesystem://", id="filesystem"),
    pytest.param(
        "redis://127.0.0.1:6379/15",
        id="redis",
        marks=pytest.mark.skipif(not reachable(6379), reason="Redis is not running on 127.0.0.1:6379"),
    ),
    pytest.param(
        "amqp://guest:guest@127.0.0.1:5672//",
        id="rabbitmq",
        marks=pytest.mark.skipif(not reachable(5672), reason="RabbitMQ is not running on 127.0.0.1:5672"),
    ),
]

SAVE_SCRIPT = """
import django
django.setup()
from django.test import override_settings
from demo_site.blog.models import Author, Post
from django.conf import settings
with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "INDEX_ON_SAVE": "celery"}):
    author = Author.objects.create(name="Ines Park", slug="ines-{suffix}")
    Post.objects.create(
        title="Cold-brewing sencha overnight", slug="cold-brew-sencha-{suffix}", author=author, status="published",
        summary="Ten grams, a litre of cold water, eight hours in the fridge.",
        body="## Method\\n\\nPut 10 g of sencha in 1 litre of cold water and leave it for eight hours.",
    )
"""


def worker_env(broker: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],
        "AGENT_HANDSHAKE_TEST_BROKER": broker,
        "AGENT_HANDSHAKE_QUEUE_DIR": str(tmp_path / "queue"),
        "AGENT_HANDSHAKE_TEST_QUEUE": f"agent-handshake-test-{uuid.uuid4().hex[:8]}",
    }


@contextlib.contextmanager
def running_worker(env: dict[str, str]):
    """A real Celery worker of the demo project on the test queue; on the way out, it must not have logged a
    traceback."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "demo_site", "worker", "--pool", "solo", "--loglevel", "WARNING",
         "-Q", env["AGENT_HANDSHAKE_TEST_QUEUE"], "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            output, _ = worker.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
    assert "Traceback" not in output, output


@pytest.mark.parametrize("broker", BROKERS)
def test_a_saved_object_is_indexed_by_a_worker(broker, tmp_path):
    (tmp_path / "queue").mkdir()
    env = worker_env(broker, tmp_path)
    with running_worker(env):
        suffix = uuid.uuid4().hex[:6]
        subprocess.run(
            [sys.executable, "-c", SAVE_SCRIPT.replace("{suffix}", suffix)], cwd=ROOT, env=env, check=True, timeout=60
        )
        deadline = time.monotonic() + 90
        document = None
        while time.monotonic() < deadline:
            document = Document.objects.filter(path=f"/blog/cold-brew-sencha-{suffix}/").first()
            if document is not None and document.indexed_hash == document.content_hash:
                break
            time.sleep(0.3)
        assert document is not None, "the worker did not index the saved post"
        assert document.indexed_hash == document.content_hash
        passages = Passage.objects.filter(document=document)
        assert passages.exists()
        assert all(passage.embedding is not None for passage in passages)
        assert "eight hours" in " ".join(passages.values_list("text", flat=True))


POOL_SCRIPT = """
import datetime
import django
django.setup()
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from agent_handshake.concierge import input_pool
from agent_handshake.concierge.conversation import Owner
from agent_handshake.models import UnmappedFragment
texts = ["a gift box please", "could you gift wrap it", "wrapped as a gift", "gift wrapping for my mother",
         "put it in a gift box"]
with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "INDEX_ON_SAVE": "celery"}):
    with transaction.atomic():  # each record queues the pool's update for when this commits
        for number, text in enumerate(texts):
            fragment = input_pool.record("check_inventory", text, Owner(None, f"198.51.{number % 3}.7"))
            earlier = timezone.now() - datetime.timedelta(hours=number)  # over the default hour's span
            UnmappedFragment.objects.filter(pk=fragment.pk).update(created_at=earlier)
"""


def test_the_input_pool_is_clustered_by_a_worker(tmp_path):
    """Schema templates' ``other`` texts, recorded in another process, become a proposed key on a real worker."""
    from agent_handshake.models import ProposedField, UnmappedFragment

    (tmp_path / "queue").mkdir()
    env = worker_env("filesystem://", tmp_path)
    with running_worker(env):
        subprocess.run([sys.executable, "-c", POOL_SCRIPT], cwd=ROOT, env=env, check=True, timeout=60)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not ProposedField.objects.exists():
            time.sleep(0.3)
        proposal = ProposedField.objects.get(capability="check_inventory")
        assert proposal.status == ProposedField.Status.PENDING
        assert (proposal.fragments, proposal.sources) == (5, 3)
        assert "gift" in proposal.name
        assert not UnmappedFragment.objects.filter(embedding=None).exists()


DAILY_SCRIPT = """
import django
django.setup()
from agent_handshake.tasks import insights_daily
insights_daily.delay()
"""


def test_the_daily_insights_task_runs_on_a_worker(tmp_path):
    """Agent traffic of closed days is aggregated, and raw records past retention purged, by a real worker."""
    import datetime

    from agent_handshake.insights.aggregation import site_today
    from agent_handshake.models import AgentRequest, DailyTraffic
    from tests.test_insights_aggregates import plant_traffic

    planted = plant_traffic(site_today() - datetime.timedelta(days=30))  # its first day is 33 days old
    (tmp_path / "queue").mkdir()
    env = worker_env("filesystem://", tmp_path)
    with running_worker(env):
        subprocess.run([sys.executable, "-c", DAILY_SCRIPT], cwd=ROOT, env=env, check=True, timeout=60)
        oldest_kept = site_today() - datetime.timedelta(days=30)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (
            not DailyTraffic.objects.filter(day=planted.days[-1]).exists()
            or AgentRequest.objects.filter(at__date__lt=oldest_kept).exists()
        ):
            time.sleep(0.3)
    aggregated = {
        day: sum(DailyTraffic.objects.filter(day=day).values_list("requests", flat=True)) for day in planted.days
    }
    assert aggregated == {day: sum(row.at.date() == day for row in planted.rows) for day in planted.days}
    # INSIGHTS_RETENTION_DAYS is 30: the days more than 30 days old are purged, their aggregates kept.
    assert not AgentRequest.objects.filter(at__date__lt=oldest_kept).exists()
    assert AgentRequest.objects.filter(at__date=planted.days[-1]).count() == aggregated[planted.days[-1]]
