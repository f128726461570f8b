"""Live re-indexing through a real Celery worker process, on each broker this machine offers.

A separate process saves a registered object (so the save, the on-commit hook and the publish are the real
ones), a real worker (``celery -A demo_site worker``) consumes the task, and the test reads the database. The
embedded default broker (kombu's filesystem transport) always runs; Redis and RabbitMQ run when they answer on
127.0.0.1, and are reported as skipped, with the reason, when they do not. The filesystem broker's worker also
clusters the schema templates' input pool and runs the daily insights task: one worker per broker serves its
cases (subtests), each on data of its own.
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
from celery import Celery
from django.db import connection

from agent_handshake.models import Document, Passage

ROOT = Path(__file__).resolve().parents[2]
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


def worker_command(env: dict[str, str], name: str) -> list[str]:
    """``celery worker`` of the demo project on the test queue, one job at a time, as node ``name``.

    The name is unique: the Redis and RabbitMQ on 127.0.0.1 may serve other test runs' workers, and
    :func:`stop_workers` addresses this one alone."""
    return [sys.executable, "-m", "celery", "-A", "demo_site", "worker", "--pool", "solo", "--loglevel", "WARNING",
            "-Q", env["AGENT_HANDSHAKE_TEST_QUEUE"], "--without-heartbeat", "--without-gossip", "--without-mingle",
            "-n", name]  # fmt: skip


def worker_name(number: int = 0) -> str:
    return f"w{number}-{uuid.uuid4().hex[:8]}@agent-handshake-tests"


def stop_workers(env: dict[str, str], workers: dict[str, subprocess.Popen]) -> str:
    """Stop the workers (node name: process) still running, as an operator would, and return everything they wrote.

    Each gets SIGTERM, Celery's warm shutdown: a job in progress is finished first. SIGTERM only sets a flag that
    the worker's consumer loop reads between two waits for messages, and an idle worker waits long: on the
    filesystem transport each wait lasts 2 s and the loop waits once more after reading the flag (2 to 4 s); on
    RabbitMQ the event loop sleeps until its next timer (5 to 7 s here). So each is also sent Celery's remote-control
    ``shutdown`` (what ``celery control shutdown -d NAME`` sends): a message, which ends the wait at once, handled
    between jobs like the flag and followed by the same warm shutdown. Were it lost, SIGTERM still stops the worker.
    """
    running = {name: worker for name, worker in workers.items() if worker.poll() is None}
    for worker in running.values():
        worker.terminate()
    output = ""
    try:
        if running:
            broker = env["AGENT_HANDSHAKE_TEST_BROKER"]
            # A bare client: no Django fix-up, only the broker and the folders the workers read.
            with Celery("agent-handshake-tests", broker=broker, set_as_current=False, fixups=[]) as control:
                control.conf.broker_transport_options = transport_options(env)
                control.control.shutdown(destination=list(running))
    finally:
        for worker in workers.values():
            try:
                out, _ = worker.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                out, _ = worker.communicate()
            output += out or ""
    return output


def transport_options(env: dict[str, str]) -> dict[str, str]:
    """The broker's transport options that tests/settings.py gives a worker started with ``env``."""
    if not env["AGENT_HANDSHAKE_TEST_BROKER"].startswith("filesystem"):
        return {}
    folder = Path(env["AGENT_HANDSHAKE_QUEUE_DIR"])
    return {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(folder / "control")}


@contextlib.contextmanager
def running_worker(env: dict[str, str]):
    """A real Celery worker of the demo project on the test queue; on the way out, it must not have logged a
    traceback."""
    name = worker_name()
    worker = subprocess.Popen(
        worker_command(env, name), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield worker
    finally:
        output = stop_workers(env, {name: worker})
    assert "Traceback" not in output, output


def a_saved_object_is_indexed(env: dict[str, str]) -> None:
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


def the_input_pool_is_clustered(env: dict[str, str]) -> None:
    """Schema templates' ``other`` texts, recorded in another process, become a proposed key on a real worker."""
    from agent_handshake.models import ProposedField, UnmappedFragment

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


def the_daily_insights_task_runs(env: dict[str, str]) -> None:
    """Agent traffic of closed days is aggregated, and raw records past retention purged, by a real worker."""
    import datetime

    from agent_handshake.insights.aggregation import site_today
    from agent_handshake.models import AgentRequest, DailyTraffic
    from tests.insights.test_aggregates import plant_traffic

    planted = plant_traffic(site_today() - datetime.timedelta(days=30))  # its first day is 33 days old
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


@pytest.mark.parametrize("broker", BROKERS)
def test_a_worker_runs_the_tasks(broker, tmp_path, subtests):
    """One worker per broker: a saved object is indexed on each broker; the input pool and the daily insights,
    whose tasks depend on no broker, on the filesystem one. The cases' data are their own (a post, a pool's
    fragments, traffic records), and each case waits for its own outcome."""
    (tmp_path / "queue").mkdir()
    env = worker_env(broker, tmp_path)
    with running_worker(env):
        with subtests.test("a saved object is indexed"):
            a_saved_object_is_indexed(env)
        if broker.startswith("filesystem"):
            with subtests.test("the input pool is clustered"):
                the_input_pool_is_clustered(env)
            with subtests.test("the daily insights task"):
                the_daily_insights_task_runs(env)
