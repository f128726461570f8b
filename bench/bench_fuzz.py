"""A soak of generated hostile requests over real HTTP: no 5xx, AHP endpoints answer JSON with rate-limit headers.

The demo site (its URLs, templates and content, loaded and indexed in this benchmark's own database) is served on
127.0.0.1 by Django's runserver (what ``make demo`` runs: it passes almost anything on to Django) and by gunicorn
(1 worker x 2 threads), every rate limit lifted (all requests come from one address), ``--cases`` each. The cases are
drawn by hypothesis from the strategies of tests/fuzzing.py that tests/robustness/test_bad_input.py runs a bounded
number of, seeded, without shrinking: AHP bodies with hostile strings, wrong types, impossible dates and deep nesting,
random JSON and bytes; credentials valid (a real key, real signatures) and malformed; Accept, Content-Type,
Content-Length, Idempotency-Key and conditional headers; any method on the app's URLs and on percent-encoded paths
holding NULs, encoded surrogates and ``.md`` suffixes.

What HTTP cannot carry is adapted, not dropped: header values are sent as UTF-8 bytes with CR/LF made spaces; a
Content-Length that is a number is sent as the body's true length (a wrong one only desynchronises the
connection), any other value as it is. The server itself refuses some requests before Django sees them (gunicorn:
control characters in a header, ``Content-Length: abc``); those are counted apart (a response without the
middleware's ``Link`` header), and checked only for their status. Every other response is checked with
``tests.fuzzing.problems``. The exit status is 1 if any response broke an invariant.

    python bench/bench_fuzz.py [--cases 10000] [--servers runserver gunicorn] [--seed 9] [--max-seconds 900]
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import shutil
import tempfile
import time

from bench_retrieval_quality import fresh_database
from common import LiveServer, print_table

from tests import fuzzing


class Soak:
    """Sends cases to the server and keeps the counts."""

    def __init__(self, port: int, secret: str, cases: int, deadline: float) -> None:
        self.port = port
        self.secret = secret
        self.cases = cases
        self.deadline = deadline
        self.conn: http.client.HTTPConnection | None = None
        self.sent = 0
        self.by_class: collections.Counter[str] = collections.Counter()
        self.by_status: collections.Counter[int] = collections.Counter()
        self.by_kind: collections.Counter[str] = collections.Counter()
        self.problems: collections.Counter[str] = collections.Counter()
        self.server_refusals = 0
        self.examples: list[str] = []

    def connection(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        return self.conn

    def request(self, case: fuzzing.Case) -> tuple[int, str, dict[str, str], bytes]:
        headers: dict[str, bytes] = {}
        for name, value in fuzzing.resolve(case, self.secret).items():
            if name == fuzzing.CONTENT_LENGTH:
                name, value = "Content-Length", value if not value.isdigit() else str(len(case.body))
            cleaned = value.replace("\r", " ").replace("\n", " ")
            headers[name] = cleaned.encode("utf-8", "surrogatepass")
        headers.setdefault("Content-Type", b"application/json")
        for attempt in (1, 2):  # a connection the server closed (after a refusal) is opened again once
            conn = self.connection()
            try:
                conn.request(case.method, case.path, body=case.body or None, headers=headers)
                response = conn.getresponse()
                body = response.read()
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if response.getheader("Connection", "").lower() == "close" or response.will_close:
                conn.close()
                self.conn = None
            return response.status, response.getheader("Content-Type", ""), dict(response.getheaders()), body
        raise AssertionError("unreachable")

    def __call__(self, case: fuzzing.Case) -> None:
        if self.sent >= self.cases or time.monotonic() > self.deadline:
            return
        status, content_type, headers, body = self.request(case)
        self.sent += 1
        self.by_class[f"{status // 100}xx"] += 1
        self.by_status[status] += 1
        kind = fuzzing.endpoint(case.path) or "other URL"
        self.by_kind[kind] += 1
        if "agent-manifest" not in headers.get("Link", ""):  # every response Django sends has it (middleware)
            self.server_refusals += 1
            found = [f"status {status}"] if status >= 500 else []
        else:
            found = fuzzing.problems(case, status, content_type, headers, body)
        for problem in found:
            self.problems[problem] += 1
        if found and len(self.examples) < 10:
            self.examples.append(f"{found}: {case.describe()} -> {status} {body[:200]!r}")


def prepare_database() -> str:
    """The demo content, loaded and indexed, and an API key with every scope; its secret."""
    from django.core.management import call_command

    from agent_handshake.models import AgentClient, ApiKey

    call_command("migrate", verbosity=0)
    call_command("loaddata", "demo", verbosity=0)
    call_command("agent_reindex", verbosity=0)
    client, _ = AgentClient.objects.get_or_create(name="bench_fuzz")
    return ApiKey.objects.issue(client, scopes=["*"])[1]


def soak(server: str, args: argparse.Namespace, secret: str) -> tuple[Soak, float]:
    with LiveServer(args.port, threads=2, server=server, quiet=True):
        started = time.monotonic()
        run = Soak(args.port, secret, args.cases, started + args.max_seconds)
        # More examples than cases: hypothesis may skip a few draws; the soak stops at --cases.
        fuzzing.run(fuzzing.all_cases(), int(args.cases * 1.05) + 10, run, random_seed=args.seed)
        return run, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000, help="per server")
    parser.add_argument("--servers", nargs="+", default=["runserver", "gunicorn"], choices=["runserver", "gunicorn"])
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--max-seconds", type=float, default=900, help="per server: stop sending after this long")
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--database", default="agent_handshake_bench_fuzz")
    args = parser.parse_args()

    fresh_database(args.database)
    queue_dir = tempfile.mkdtemp(prefix="bench-fuzz-queue-")  # accepted async jobs are queued here, never run
    os.environ.update(BENCH_DATABASE=args.database, BENCH_FUZZ="1", AGENT_HANDSHAKE_QUEUE_DIR=queue_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    print("Loading and indexing the demo content ...", flush=True)
    secret = prepare_database()
    rows, broken = [], False
    try:
        for server in args.servers:
            run, elapsed = soak(server, args, secret)
            problems = run.problems
            rows.append(
                [
                    server,
                    run.sent,
                    run.by_class["2xx"],
                    run.by_class["3xx"],
                    run.by_class["4xx"],
                    run.by_class["5xx"],
                    sum(n for problem, n in problems.items() if "JSON" in problem or "Content-Type" in problem),
                    sum(n for problem, n in problems.items() if problem.startswith("no X-RateLimit")),
                    run.server_refusals,
                    ", ".join(f"{kind} {n}" for kind, n in sorted(run.by_kind.items())),
                    f"{elapsed:.0f}",
                    f"{run.sent / elapsed:.0f}",
                ]
            )
            if run.sent < args.cases:
                print(f"{server}: only {run.sent} of {args.cases} cases sent within {args.max_seconds:.0f} s.")
            if problems:
                broken = True
                print(f"\n{server}: broken invariants {json.dumps(dict(problems))}")
                print("\n".join(run.examples))
            print(f"{server}: statuses {json.dumps(dict(sorted(run.by_status.items())))}", flush=True)
    finally:
        shutil.rmtree(queue_dir, ignore_errors=True)
    print_table(
        f"Generated hostile requests over HTTP on 127.0.0.1 (demo content, limits lifted), seed {args.seed}",
        [
            "server",
            "cases",
            "2xx",
            "3xx",
            "4xx",
            "5xx",
            "non-JSON (AHP)",
            "no X-RateLimit-*",
            "refused by server",
            "cases by endpoint",
            "s",
            "req/s",
        ],
        rows,
    )
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
