"""Async MODE3 jobs end to end: a real HTTP server (gunicorn) and a real Celery worker process, each on the
embedded default broker, and on Redis and RabbitMQ when they answer on 127.0.0.1 (reported as skipped, with the
reason, when they do not).

Accepted -> pending -> success by poll and by a signed callback to a receiver on 127.0.0.1; failures; a worker
killed mid-job (the job is finished by another worker, once); the human desk answered in the admin; expiry. One
server and worker per broker serve these cases in turn, each a subtest with jobs of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.db import connection

from agent_handshake import keys
from agent_handshake.concierge import callbacks
from agent_handshake.models import AgentClient, ApiKey, Job
from tests.concierge.test_callbacks import Receiver
from tests.content.test_celery_worker import BROKERS, stop_workers, worker_command, worker_name
from tests.testapp.models import Report

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack:
    """gunicorn serving tests.settings and a Celery worker, both on ``broker`` and the test database."""

    def __init__(self, broker: str, tmp_path: Path) -> None:
        self.broker = broker
        filesystem = broker.startswith("filesystem")
        self.email_dir = tmp_path / "mail"
        self.email_dir.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],
            "AGENT_HANDSHAKE_TEST_BROKER": broker,
            # The filesystem broker shares this test process's folder and queue, so what the test process sends
            # (an operator's answer in the admin queues a callback) reaches the worker too.
            "AGENT_HANDSHAKE_QUEUE_DIR": str(settings.QUEUE_DIR),
            "AGENT_HANDSHAKE_TEST_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE
            if filesystem
            else f"agent-handshake-jobs-{uuid.uuid4().hex[:8]}",
            "AGENT_HANDSHAKE_TEST_EMAIL_DIR": str(self.email_dir),
        }
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers: list[subprocess.Popen] = []
        self.worker_names: list[str] = []
        self.server: subprocess.Popen | None = None

    def start_worker(self) -> subprocess.Popen:
        name = worker_name(len(self.workers))
        worker = subprocess.Popen(
            worker_command(self.env, name), cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.workers.append(worker)
        self.worker_names.append(name)
        return worker

    @property
    def worker(self) -> subprocess.Popen:
        """The worker started last (the one running, unless a test stopped it)."""
        return self.workers[-1]

    def __enter__(self) -> Stack:
        self.server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "demo_site.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
             "--workers", "1", "--threads", "4", "--log-level", "warning"],
            cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.start_worker()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return self
            time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    def __exit__(self, *exc: object) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
        self.output = ""
        try:
            self.output += stop_workers(self.env, dict(zip(self.worker_names, self.workers, strict=True)))
        finally:
            if self.server is not None:
                try:
                    _, err = self.server.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    self.server.kill()
                    _, err = self.server.communicate()
                self.output += err or ""
        if exc[0] is None:
            assert "Traceback" not in self.output, self.output

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def key_with_secret(name="Job agent"):
    client, _ = AgentClient.objects.get_or_create(name=name)
    return ApiKey.objects.issue(client, scopes=["*"])


def poll_until(stack: Stack, path: str, secret: str, done=("success", "failed", "expired"), timeout=60):
    """Poll like an agent; returns every status seen and the last body."""
    seen, body = [], {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = stack.request("GET", path, headers={"Authorization": f"Bearer {secret}"})
        assert status == 200, body
        seen.append(body["status"])
        if body["status"] in done:
            return seen, body
        time.sleep(0.1)
    raise AssertionError(f"the job did not finish: {seen[-5:]} {body}")


def wait_for(predicate, timeout=30, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


def job_by_poll_and_signed_callback(stack: Stack, ahp_schemas: dict) -> None:
    from tests.ahp.test_converse import assert_valid_response

    key, secret = key_with_secret()
    receiver = Receiver().start()
    try:
        status, accepted = stack.request(
            "POST",
            "/agent/converse",
            {"capability": "compile_report", "query": "Report on oolong", "context": {
                "input": {"topic": "oolong tea in Taiwan", "seconds": 1.5},
                "callback_url": receiver.url(), "accept_types": ["application/action-result"]}},
            {"Authorization": f"Bearer {secret}"},
        )  # fmt: skip
        assert status == 202, accepted
        assert_valid_response(accepted, ahp_schemas)
        assert accepted["callback"] == {"method": "POST", "url": receiver.url()}
        seen, final = poll_until(stack, accepted["poll"], secret)
        assert "pending" in seen
        assert final["status"] == "success"
        assert_valid_response(final, ahp_schemas)
        result = final["response"]["payload"]["result"]
        assert result["words"] == 4
        assert final["response"]["payload"]["action"] == "compile_report"
        report = Report.objects.get(job_id=accepted["session_id"])
        assert report.worker_pid == result["worker_pid"] == stack.worker.pid
        wait_for(lambda: receiver.requests, message="the callback")
        delivered = receiver.requests[0]
        assert delivered["headers"]["X-AHP-Key-Id"] == key.key_id
        assert callbacks.verify(secret, delivered["body"], delivered["headers"][callbacks.SIGNATURE_HEADER])
        assert not callbacks.verify(secret, delivered["body"] + b" ", delivered["headers"][callbacks.SIGNATURE_HEADER])
        assert json.loads(delivered["body"]) == final
        job = wait_for(lambda: Job.objects.filter(pk=accepted["session_id"], callback_state="delivered").first())
        assert job.callback_attempts == 1
        assert job.callback_last_status == 200
        assert len(receiver.requests) == 1
    finally:
        receiver.stop()


def failed_job_and_callback_retried_after_errors(stack: Stack) -> None:
    _, secret = key_with_secret()
    receiver = Receiver(status=503).start()
    try:
        status, accepted = stack.request(
            "POST",
            "/agent/converse",
            {"capability": "compile_report", "query": "Report", "context": {
                "input": {"topic": "pu-erh", "fail": True}, "callback_url": receiver.url()}},
            {"Authorization": f"Bearer {secret}"},
        )  # fmt: skip
        assert status == 202
        _, final = poll_until(stack, accepted["poll"], secret)
        assert final["status"] == "failed"
        assert final["error"] == {"code": "invalid_request", "message": "The report could not be compiled."}
        assert not Report.objects.filter(job_id=accepted["session_id"]).exists()  # rolled back with the failure
        wait_for(lambda: len(receiver.requests) >= 2, message="two refused callback attempts")
        receiver.status = 200
        job = wait_for(lambda: Job.objects.filter(pk=accepted["session_id"], callback_state="delivered").first())
        assert job.callback_attempts >= 3
        assert json.loads(receiver.requests[-1]["body"])["status"] == "failed"
    finally:
        receiver.stop()


def a_worker_killed_mid_job_leaves_it_to_another_which_finishes_it_once(stack: Stack, broker: str) -> None:
    _, secret = key_with_secret()
    first = stack.worker
    status, accepted = stack.request(
        "POST",
        "/agent/converse",
        {"capability": "compile_report", "query": "Report",
         "context": {"input": {"topic": "matcha grades", "seconds": 6}}},
        {"Authorization": f"Bearer {secret}"},
    )  # fmt: skip
    assert status == 202
    job_id = accepted["session_id"]
    wait_for(lambda: Job.objects.filter(pk=job_id, status="running").exists(), message="the job to start")
    time.sleep(1)  # inside the handler: its Report row is written, not committed
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    assert Job.objects.get(pk=job_id).status == "running"
    assert not Report.objects.filter(job_id=job_id).exists()
    second = stack.start_worker()
    time.sleep(1)
    recovered = stack.manage("agent_recover_jobs", "--older-than", "0")
    if broker.startswith("filesystem"):  # no redelivery: only the recovery sends the job again
        assert re.search(r"(?m)^requeued: 1,", recovered), recovered  # not "callbacks requeued: 1,"
    # RabbitMQ gives the unacknowledged message to the second worker at once (acks_late); Redis would after its
    # visibility timeout. Either way the row lock lets one worker run it.
    _, final = poll_until(stack, accepted["poll"], secret)
    assert final["status"] == "success"
    reports = Report.objects.filter(job_id=job_id)
    assert reports.count() == 1
    assert reports.get().worker_pid == second.pid
    job = Job.objects.get(pk=job_id)
    assert job.attempts == 2
    # Sending it again changes nothing: the job is finished.
    stack.manage("agent_recover_jobs", "--older-than", "0")
    time.sleep(1)
    assert Report.objects.filter(job_id=job_id).count() == 1


def human_desk_answer_reaches_the_agent_by_poll_and_callback(stack: Stack, admin_client) -> None:
    _, secret = key_with_secret()
    mailed_before = set(stack.email_dir.iterdir())
    receiver = Receiver().start()
    try:
        status, accepted = stack.request(
            "POST",
            "/agent/converse",
            {"capability": "escalate_to_human", "query": "Can you blend 2 kg of a smoky tea for a café?",
             "context": {"requesting_agent": "cafe-bot/2", "callback_url": receiver.url(),
                         "accept_types": ["application/action-result"]}},
            {"Authorization": f"Bearer {secret}"},
        )  # fmt: skip
        assert status == 202
        job_id = accepted["session_id"]
        waiting = wait_for(
            lambda: (
                stack.request("GET", accepted["poll"], headers={"Authorization": f"Bearer {secret}"})[1]
                if Job.objects.get(pk=job_id).status == "waiting"
                else None
            ),
            message="the job to reach the desk",
        )
        assert waiting["progress"] == "Waiting for a human operator"
        # The worker's file backend creates the file before it writes the message, and ends every message
        # with a line of 79 dashes: wait for that line, not for the file (a new one: the stack's other cases mail
        # the desk too).
        text = wait_for(
            lambda: next(
                (
                    t
                    for f in set(stack.email_dir.iterdir()) - mailed_before
                    if (t := f.read_text()).rstrip().endswith("-" * 79)
                ),
                None,
            ),
            message="the operators' email",
        )
        assert "desk@example.com" in text
        assert "smoky tea" in text
        queue = admin_client.get("/admin/agent_handshake/deskrequest/").content.decode()
        assert "smoky tea" in queue
        page = f"/admin/agent_handshake/deskrequest/{quote(job_id)}/change/"
        response = admin_client.post(page, {"operator_answer": "Yes: our Lapsang blend, 2 kg for $180."})
        assert response.status_code == 302
        _, final = poll_until(stack, accepted["poll"], secret)
        assert final["status"] == "success"
        assert final["response"]["answer"] == "Yes: our Lapsang blend, 2 kg for $180."
        assert final["response"]["payload"]["result"]["answered_by"] == "admin"
        wait_for(lambda: receiver.requests, message="the callback")
        assert json.loads(receiver.requests[0]["body"]) == final
        # An answered request takes no second answer.
        admin_client.post(page, {"operator_answer": "A second thought"})
        assert stack.request("GET", accepted["poll"], headers={"Authorization": f"Bearer {secret}"})[1] == final
        assert len(receiver.requests) == 1
    finally:
        receiver.stop()


def unanswered_desk_request_expires(stack: Stack) -> None:
    from datetime import timedelta

    from django.utils import timezone

    _, secret = key_with_secret()
    receiver = Receiver().start()
    try:
        _, accepted = stack.request(
            "POST",
            "/agent/converse",
            {"capability": "escalate_to_human", "query": "Anyone there?",
             "context": {"callback_url": receiver.url()}},
            {"Authorization": f"Bearer {secret}"},
        )  # fmt: skip
        job_id = accepted["session_id"]
        wait_for(lambda: Job.objects.filter(pk=job_id, status="waiting").exists(), message="the desk")
        Job.objects.filter(pk=job_id).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert "expired: 1" in stack.manage("agent_recover_jobs")
        _, final = poll_until(stack, accepted["poll"], secret)
        assert final["status"] == "expired"
        wait_for(lambda: receiver.requests, message="the callback")
        assert json.loads(receiver.requests[0]["body"])["status"] == "expired"
    finally:
        receiver.stop()


@pytest.mark.parametrize("broker", BROKERS)
def test_jobs_on_a_real_worker(broker, tmp_path, ahp_schemas, admin_client, subtests):
    """One server and worker per broker serve the cases in turn, each with a key, jobs and a callback receiver of
    its own, and each waiting for its jobs to end: a job by poll and signed callback and a worker killed mid-job on
    every broker, and on the filesystem broker's stack the cases that depend on no broker (a failed job, the human
    desk answered, a desk request expired). The killed worker's case comes last: it leaves the stack a second
    worker."""
    with Stack(broker, tmp_path) as stack:
        with subtests.test("job by poll and signed callback"):
            job_by_poll_and_signed_callback(stack, ahp_schemas)
        if broker.startswith("filesystem"):
            with subtests.test("failed job, callback retried after errors"):
                failed_job_and_callback_retried_after_errors(stack)
            with subtests.test("human desk answer by poll and callback"):
                human_desk_answer_reaches_the_agent_by_poll_and_callback(stack, admin_client)
            with subtests.test("unanswered desk request expires"):
                unanswered_desk_request_expires(stack)
        with subtests.test("worker killed mid-job"):
            a_worker_killed_mid_job_leaves_it_to_another_which_finishes_it_once(stack, broker)


def test_secrets_are_recomputed_for_signing_only_from_secret_key(settings):
    key, secret = key_with_secret()
    assert keys.recover_secret(key.key_id, key.salt, key.secret_hash) == secret
    old = settings.SECRET_KEY
    settings.SECRET_KEY = "rotated"
    assert keys.recover_secret(key.key_id, key.salt, key.secret_hash) is None
    settings.SECRET_KEY_FALLBACKS = [old]
    assert keys.recover_secret(key.key_id, key.salt, key.secret_hash) == secret


class HeldAfterClaim:
    """A database execute wrapper that holds a job's delivery between its claim (committed) and its run: ``claimed``
    is set when the run asks for the job's row lock, and the delivery goes on once ``go_on`` is set."""

    def __init__(self) -> None:
        self.claimed, self.go_on = threading.Event(), threading.Event()
        self.locks: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if "FOR UPDATE" in sql:
            self.locks.append(sql)
            if len(self.locks) == 2:  # the run's row lock: the claim before it is committed
                self.claimed.set()
                self.go_on.wait(30)
        return execute(sql, params, many, context)


def test_a_duplicate_message_while_a_worker_has_the_job_uses_no_attempt():
    """Celery may deliver one message twice (acks_late: a redelivery, a lost acknowledgement). A copy that arrives
    while the first delivery's worker has the job (here: its claim is committed, its run not yet begun) is no try:
    it must neither count an attempt nor, for a job on its last attempt, fail it untried."""
    from agent_handshake.conf import app_settings
    from agent_handshake.tasks import run_job

    last = app_settings.JOB_MAX_ATTEMPTS
    key, _ = key_with_secret()
    job = Job.objects.create(
        capability="compile_report", api_key=key, input={"topic": "genmaicha blends"}, attempts=last - 1
    )  # tried before; this delivery is its last attempt
    message_id = str(uuid.uuid4())
    held = HeldAfterClaim()
    first: dict[str, str] = {}

    def first_delivery():
        try:
            with connection.execute_wrapper(held):
                first["status"] = run_job.apply((job.pk,), task_id=message_id).get()
        finally:
            connection.close()

    worker = threading.Thread(target=first_delivery)
    worker.start()
    try:
        assert held.claimed.wait(30), "the first delivery did not claim the job"
        assert Job.objects.get(pk=job.pk).attempts == last
        assert run_job.apply((job.pk,), task_id=message_id).get() == "skipped"  # the same message, again
        job.refresh_from_db()
        assert (job.status, job.attempts, job.error) == ("running", last, None)
    finally:
        held.go_on.set()
        worker.join(30)
    assert first["status"] == "success"
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("success", last)
    assert Report.objects.filter(job_id=job.pk).count() == 1
    # Once finished, the message delivered yet again changes nothing.
    assert run_job.apply((job.pk,), task_id=message_id).get() == "skipped"
    assert Job.objects.get(pk=job.pk).attempts == last
