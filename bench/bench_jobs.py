"""Async MODE3 jobs over real HTTP (gunicorn) and a real Celery worker process, on each broker, in one run.

The job is ``bench_echo`` (bench/jobsapp): its handler returns at once, so what is timed is the job machinery
(the job row, the broker, the worker's claim and commit, polling, callbacks), not work of the capability's own.
Every figure is given for the embedded default broker (kombu's filesystem transport, which the worker polls at
the interval the settings give) and for Redis (``--redis``; skipped, with the reason, when it does not answer).
Each broker gets a fresh gunicorn (1 worker x 2 threads) and one worker process (``celery -A demo_site worker
--pool solo``), both on bench/settings_jobs.py and this benchmark's own database.

Figures, and what each is compared against:

1. Time to ``202 accepted``: p50/p95 of ``--requests`` sequential POSTs on one keep-alive connection, against a
   MODE2 ``site_info`` answer (200) timed in the same run, request by request in alternation so both share the
   machine's noise. ``site_info`` embeds its question and retrieves over the indexed demo content (answer and
   embedding caches off): the cheapest useful converse answer. Accepting (a job row and a broker publish, no
   retrieval) should cost a fraction of it; the last column is the ratio to site_info's p50.
2. One job at a time, end to end: from the 202 to the first poll (every 20 ms, like an eager agent) that says
   ``success``, over ``--jobs`` jobs. The floor it is compared against is the polling itself: up to 20 ms of the
   client's interval plus, on the filesystem broker, up to one broker polling interval before the worker sees
   the message. The job row's timestamps split the worker's side: created -> started (commit, publish, delivery,
   claim) and started -> finished (the handler and the job's transaction).
3. Jobs per second through one worker, ``--burst`` jobs submitted back to back on one connection, twice: with
   the worker running (clock from the first submission to the last ``finished_at``; the lower of the submission
   rate, shown as 202s/s, and the worker's rate wins), then with the worker paused (SIGSTOP) until all are
   queued (clock from its resumption): the worker's own rate. Compared across brokers and with the 202s/s.
4. Signed callbacks to a receiver on 127.0.0.1 (``ThreadingHTTPServer``): the time from ``finished_at`` to
   receipt, and callbacks per second. One job at a time (``--callback-single``, clock from the first submission):
   the delivery's own latency. A burst of ``--callbacks`` queued while the worker is paused (clock from its
   resumption): the worker runs jobs and delivers callbacks from one queue, so deliveries wait behind the jobs
   still queued; compare the rate with 3's drained jobs/s (each job now costs a run and a delivery). Every
   signature is checked as an agent would; retried counts jobs that needed more than one attempt.

    python bench/bench_jobs.py [--requests 200] [--jobs 50] [--burst 200] [--callbacks 100]
                               [--redis redis://127.0.0.1:6379/14]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path

import numpy as np
from bench_retrieval_quality import fresh_database
from common import ROOT, LiveServer, print_table

SETTINGS = "bench.settings_jobs"
POLL_SECONDS = 0.02
IDLE_RECONNECT_SECONDS = 4  # gunicorn closes keep-alive connections idle for 5 s (common.LiveServer)
SITE_QUESTIONS = [
    "Where is the shop and when is the tasting room open?",
    "How long does shipping take and what does it cost?",
    "What is your returns policy for opened tea?",
    "How can I contact you by phone or email?",
    "Do you ship outside the United States?",
    "Who runs the shop and how did it start?",
    "Can I visit for a tasting without booking?",
    "Do you sell gift cards or wholesale?",
]


def pct(seconds: list[float], q: float) -> float:
    """The q-th percentile of ``seconds``, in milliseconds."""
    return float(np.percentile(np.asarray(seconds) * 1000, q))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Client:
    """One keep-alive connection with the agent's credentials, reopened before gunicorn drops it for idling."""

    def __init__(self, port: int, secret: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None
        self.last_used = 0.0

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, float]:
        """Status, JSON body and seconds from sending the request to reading the whole response."""
        if self.conn is None or time.monotonic() - self.last_used > IDLE_RECONNECT_SECONDS:
            self.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = json.dumps(body).encode() if body is not None else None
        began = time.perf_counter()
        self.conn.request(method, path, data, self.headers)
        response = self.conn.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - began
        self.last_used = time.monotonic()
        if response.will_close:
            self.close()
        return response.status, json.loads(payload), elapsed

    def submit(self, text: str, callback_url: str = "") -> tuple[dict, float]:
        context: dict = {"input": {"text": text}}
        if callback_url:
            context["callback_url"] = callback_url
        status, body, elapsed = self.call(
            "POST", "/agent/converse", {"capability": "bench_echo", "query": "Echo the text", "context": context}
        )
        if status != 202:
            raise RuntimeError(f"bench_echo answered {status}: {body}")
        return body, elapsed

    def site_info(self, question: str) -> float:
        status, body, elapsed = self.call("POST", "/agent/converse", {"capability": "site_info", "query": question})
        if status != 200:
            raise RuntimeError(f"site_info answered {status}: {body}")
        return elapsed

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Receiver:
    """An agent's callback endpoint on 127.0.0.1: records each POST's arrival time, body and signature."""

    def __init__(self) -> None:
        self.arrivals: dict[str, tuple[float, bytes, str]] = {}
        self.duplicates = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrived = time.time()
                session_id = self.headers.get("X-AHP-Session-Id", "")
                with receiver.changed:
                    if session_id in receiver.arrivals:
                        receiver.duplicates += 1
                    else:
                        receiver.arrivals[session_id] = (arrived, body, self.headers.get("X-AHP-Signature", ""))
                    receiver.changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, session_ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not all(s in self.arrivals for s in session_ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sum(s not in self.arrivals for s in session_ids)
                    raise RuntimeError(f"{missing} of {len(session_ids)} callbacks did not arrive in {timeout:.0f}s")
                self.changed.wait(left)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Worker:
    """One ``celery -A demo_site worker --pool solo`` process; its output goes to a file read at the end."""

    def __init__(self, env: dict[str, str], queue: str, log_path: Path) -> None:
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "demo_site", "worker", "--pool", "solo", "--loglevel", "WARNING",
             "-Q", queue, "--without-heartbeat", "--without-gossip", "--without-mingle",
             "-n", f"bench-{uuid.uuid4().hex[:6]}@%h"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.resume()  # a stopped process would not act on SIGTERM
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.log_path.read_text()


def submit_burst(client: Client, worker: Worker, count: int, paused: bool, text: str, callback_url: str = "") -> dict:
    """Submit ``count`` jobs back to back. With ``paused`` the worker is stopped (SIGSTOP) until all are queued,
    and the clock starts when it resumes; otherwise at the first submission."""
    if paused:
        worker.pause()
    clock, began = time.time(), time.perf_counter()
    try:
        ids = [client.submit(f"{text} {n}", callback_url)[0]["session_id"] for n in range(count)]
    finally:
        submitted = time.perf_counter() - began
        if paused:
            clock = time.time()
            worker.resume()
    return {"ids": ids, "submitted": submitted, "clock": clock}


def wait_finished(session_ids: list[str], timeout: float) -> list[dict]:
    """The job rows once every one of ``session_ids`` is finished; raises if one did not succeed."""
    from agent_handshake.models import Job

    deadline = time.monotonic() + timeout
    while Job.objects.filter(pk__in=session_ids, finished_at__isnull=False).count() < len(session_ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"jobs unfinished after {timeout:.0f}s")
        time.sleep(0.05)
    rows = list(
        Job.objects.filter(pk__in=session_ids).values(
            "pk", "status", "attempts", "created_at", "started_at", "finished_at", "callback_state",
            "callback_attempts",
        )
    )  # fmt: skip
    failed = [row for row in rows if row["status"] != Job.Status.SUCCESS]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not succeed, e.g. {failed[0]}")
    return rows


def seconds_between(rows: list[dict], start: str, end: str) -> list[float]:
    return [(row[end] - row[start]).total_seconds() for row in rows]


def redis_refusal(url: str) -> str | None:
    """Why Redis cannot be used, or None when it answers."""
    try:
        import redis
    except ImportError:
        return "the redis package is not installed"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping()
    except Exception as exc:  # any failure means: skip, and say why
        return f"Redis does not answer at {url} ({exc})"
    return None


def forget_redis_queue(url: str, queue: str) -> None:
    """Remove what this run's queue left in Redis (the list and kombu's binding entries)."""
    import redis

    client = redis.Redis.from_url(url)
    client.delete(queue)
    for key in client.scan_iter("_kombu.binding*"):
        if queue.encode() in key:
            client.delete(key)
            continue
        for member in client.smembers(key):
            if queue.encode() in member:
                client.srem(key, member)


def measure_broker(label: str, broker: str, args: argparse.Namespace, secret: str, workdir: Path) -> dict:
    """Figures 1-4 for one broker: its own gunicorn, worker, queue and receiver."""
    from agent_handshake.concierge import callbacks
    from agent_handshake.models import Job

    queue = f"bench-jobs-{uuid.uuid4().hex[:8]}"
    queue_dir = workdir / label
    (queue_dir / "control").mkdir(parents=True)
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "BENCH_DATABASE": args.database,
        "AGENT_HANDSHAKE_TEST_BROKER": broker,
        "AGENT_HANDSHAKE_QUEUE_DIR": str(queue_dir),
        "AGENT_HANDSHAKE_TEST_QUEUE": queue,
    }
    port = free_port()
    results: dict = {}
    receiver = Receiver()
    worker = server = client = None
    log = ""
    try:
        worker = Worker({**os.environ, **env}, queue, workdir / f"worker-{label}.log")
        server = LiveServer(port, env)
        client = Client(port, secret)

        # Warm-up: the embedding model loaded in gunicorn, the worker connected and its first job run.
        warm = [client.submit(f"warm-up {n}")[0]["session_id"] for n in range(10)]
        for question in SITE_QUESTIONS:
            client.site_info(question)
        wait_finished(warm, 120)

        # 1. Time to 202 vs a site_info answer, alternating (which goes first alternates too).
        accept_times, info_times, accepted = [], [], []
        for n in range(args.requests):
            question = SITE_QUESTIONS[n % len(SITE_QUESTIONS)]
            if n % 2:
                info_times.append(client.site_info(question))
            body, elapsed = client.submit(f"accept {n}")
            accept_times.append(elapsed)
            accepted.append(body["session_id"])
            if not n % 2:
                info_times.append(client.site_info(question))
        results["accept"], results["site_info"] = accept_times, info_times
        wait_finished(accepted, 300)  # start 2 with an empty queue

        # 2. One job at a time, 202 -> success seen by polling.
        by_poll, single = [], []
        for n in range(args.jobs):
            body, _ = client.submit(f"single {n}")
            accepted_at = time.perf_counter()
            while True:
                time.sleep(POLL_SECONDS)
                status, state, _ = client.call("GET", body["poll"])
                if status != 200 or state["status"] in ("failed", "expired"):
                    raise RuntimeError(f"poll answered {status}: {state}")
                if state["status"] == "success":
                    break
                if time.perf_counter() - accepted_at > 60:
                    raise RuntimeError(f"job {body['session_id']} still {state['status']} after 60 s")
            by_poll.append(time.perf_counter() - accepted_at)
            single.append(body["session_id"])
        rows = wait_finished(single, 10)
        results["by_poll"] = by_poll
        results["queued"] = seconds_between(rows, "created_at", "started_at")
        results["ran"] = seconds_between(rows, "started_at", "finished_at")
        results["worker_total"] = seconds_between(rows, "created_at", "finished_at")

        # 3. Bursts through the one worker: running while the jobs arrive, then paused until all are queued.
        results["burst"] = []
        for run, paused in (("worker running", False), ("queued, then drained", True)):
            sent = submit_burst(client, worker, args.burst, paused, run)
            rows = wait_finished(sent["ids"], 600)
            last_finished = max(row["finished_at"] for row in rows).timestamp()
            results["burst"].append(
                {
                    "run": run,
                    "submitted": sent["submitted"],
                    "all_done": last_finished - sent["clock"],
                    "retried": sum(row["attempts"] > 1 for row in rows),
                }
            )

        # 4. Callbacks: one job at a time, then a burst queued while the worker is paused.
        results["callbacks"] = []
        for run, count in (("one at a time", args.callback_single), ("queued, then drained", args.callbacks)):
            if run == "one at a time":
                ids: list[str] = []
                clock = time.time()
                for n in range(count):
                    ids.append(client.submit(f"callback {n}", callback_url=receiver.url)[0]["session_id"])
                    receiver.wait_for(ids[-1:], 60)
            else:
                sent = submit_burst(client, worker, count, True, "callback", receiver.url)
                ids, clock = sent["ids"], sent["clock"]
            receiver.wait_for(ids, 600)
            rows = {row["pk"]: row for row in wait_finished(ids, 60)}
            # The worker records the delivery after the receiver has answered: wait for those rows too.
            deadline = time.monotonic() + 30
            while Job.objects.filter(pk__in=ids, callback_state=Job.Callback.DELIVERED).count() < count:
                if time.monotonic() > deadline:
                    raise RuntimeError("callbacks received but not recorded as delivered")
                time.sleep(0.05)
            attempts = dict(Job.objects.filter(pk__in=ids).values_list("pk", "callback_attempts"))
            arrivals = [receiver.arrivals[i] for i in ids]
            results["callbacks"].append(
                {
                    "run": run,
                    "count": count,
                    "rate": count / (max(a[0] for a in arrivals) - clock),
                    "latency": [receiver.arrivals[i][0] - rows[i]["finished_at"].timestamp() for i in ids],
                    "valid": sum(callbacks.verify(secret, body, signature) for _, body, signature in arrivals),
                    "retried": sum(attempts[i] > 1 for i in ids),
                }
            )
        results["duplicates"] = receiver.duplicates
    finally:
        if client is not None:
            client.close()
        if worker is not None:
            log = worker.stop()
        if server is not None:
            server.stop()
        receiver.stop()
        if broker.startswith("redis"):
            forget_redis_queue(broker, queue)
    problems = [line for line in log.splitlines() if "Traceback" in line or "ERROR" in line]
    if problems:
        print(f"  {label}: the worker logged {len(problems)} error lines, e.g. {problems[0]}", flush=True)
    return results


def prepare_database(name: str) -> str:
    """A fresh database with the demo content indexed, and an API key; returns the key's secret."""
    fresh_database(name)
    import django

    django.setup()
    from django.core.management import call_command

    from agent_handshake import state
    from agent_handshake.models import AgentClient, ApiKey, Passage

    call_command("migrate", verbosity=0)
    call_command("demo_load", verbosity=0, stdout=StringIO())
    started = time.perf_counter()
    call_command("agent_reindex", verbosity=0, stdout=StringIO())
    state.invalidate()
    passages = Passage.objects.count()
    print(f"demo content indexed: {passages} passages in {time.perf_counter() - started:.1f}s", flush=True)
    _, secret = ApiKey.objects.issue(AgentClient.objects.create(name="bench_jobs"), scopes=["*"])
    return secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="accepted and site_info requests, each (1)")
    parser.add_argument("--jobs", type=int, default=50, help="jobs run one at a time, by poll (2)")
    parser.add_argument("--burst", type=int, default=200, help="jobs submitted back to back (3)")
    parser.add_argument("--callback-single", type=int, default=20, help="callback jobs one at a time (4)")
    parser.add_argument("--callbacks", type=int, default=100, help="callback jobs in a burst (4)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--database", default="agent_handshake_bench_jobs")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    os.environ["BENCH_DATABASE"] = args.database
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["AGENT_HANDSHAKE_QUEUE_DIR"] = str(workdir)  # tests.settings would make a folder of its own
    began = time.perf_counter()
    try:
        secret = prepare_database(args.database)
        from django.conf import settings

        polling = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).get("polling_interval", 1)
        brokers = [(f"filesystem (polled every {polling * 1000:.0f} ms)", "filesystem", "filesystem://")]
        refusal = redis_refusal(args.redis)
        if refusal:
            print(f"Redis skipped: {refusal}", flush=True)
        else:
            brokers.append((f"Redis ({args.redis})", "redis", args.redis))
        measured = {}
        for name, label, url in brokers:
            print(f"measuring on {name} ...", flush=True)
            measured[name] = measure_broker(label, url, args, secret, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    for name, r in measured.items():
        info_p50 = pct(r["site_info"], 50)
        for request, times in (("POST bench_echo -> 202 accepted", r["accept"]),
                               ("POST site_info -> 200 answer", r["site_info"])):  # fmt: skip
            p50 = pct(times, 50)
            rows.append([name, request, f"{p50:.1f}", f"{pct(times, 95):.1f}", f"{p50 / info_p50:.2f}x"])
    print_table(
        f"1. Time to the response over HTTP (ms): gunicorn 1 worker x 2 threads, one keep-alive connection, "
        f"{args.requests} of each, alternating; site_info retrieves over the demo content, caches off",
        ["broker", "request", "p50", "p95", "p50 / site_info p50"],
        rows,
    )

    rows = []
    for name, r in measured.items():
        for measured_what, times in (
            ("202 -> success seen by polling every 20 ms", r["by_poll"]),
            ("job row: created -> started (commit, publish, delivery, claim)", r["queued"]),
            ("job row: started -> finished (handler and the job's transaction)", r["ran"]),
            ("job row: created -> finished", r["worker_total"]),
        ):
            rows.append([name, measured_what, f"{pct(times, 50):.1f}", f"{pct(times, 95):.1f}"])
    print_table(
        f"2. One job at a time, end to end (ms), {args.jobs} jobs, one worker --pool solo",
        ["broker", "measured", "p50", "p95"],
        rows,
    )

    rows = []
    for name, r in measured.items():
        for b in r["burst"]:
            drained = b["run"].startswith("queued")
            rows.append(
                [
                    name,
                    b["run"],
                    str(args.burst),
                    f"{args.burst / b['submitted']:.0f}",
                    "worker resumed" if drained else "first submission",
                    f"{b['all_done']:.2f}",
                    f"{args.burst / b['all_done']:.0f}",
                    str(b["retried"]),
                ]
            )
    print_table(
        "3. Throughput of one worker (--pool solo): jobs submitted back to back on one keep-alive connection",
        ["broker", "run", "jobs", "202s/s", "clock from", "all success after s", "jobs/s", "retried"],
        rows,
    )

    rows = []
    for name, r in measured.items():
        for c in r["callbacks"]:
            rows.append(
                [
                    name,
                    c["run"],
                    str(c["count"]),
                    f"{c['rate']:.1f}",
                    f"{pct(c['latency'], 50):.1f}",
                    f"{pct(c['latency'], 95):.1f}",
                    f"{c['valid']}/{c['count']}",
                    str(c["retried"]),
                ]
            )
    print_table(
        "4. Signed callbacks to a receiver on 127.0.0.1, delivered by the same worker; callbacks/s clocked from the "
        "first submission (one at a time) or the worker's resumption (queued)",
        ["broker", "run", "jobs", "callbacks/s", "finished -> received p50 ms", "p95 ms", "signatures valid",
         "retried"],
        rows,
    )  # fmt: skip
    duplicates = sum(r["duplicates"] for r in measured.values())
    print(f"\nduplicate callbacks received: {duplicates}; total run time {time.perf_counter() - began:.0f}s")


if __name__ == "__main__":
    main()
