"""Agent traffic insights: what recording every request costs ``POST /agent/converse``, and writing the records.

Set-up: the demo site's content in a database of its own, loaded and indexed by the app (real passages, real
MiniLM embeddings); the answer cache off, every question embedded, limits lifted (``BENCH_RELAXED_LIMITS``); the
writer thread on, writing every ``INSIGHTS_FLUSH_SECONDS`` (2) as in production. Through the Django WSGI handler
in process, each p50/p95 in milliseconds:

1. converse for ``--questions`` questions (the demo documents' titles asked about, and questions the site has
   nothing on), ``--rounds`` times, with recording on and off taking turns per question (which goes first
   alternates), so machine noise falls on both alike. Target: recording on within 1.03x of off at p50.
2. what a request pays: opening, noting and finishing a record (the append under the lock), in microseconds;
3. ``flush()`` of ``--batch`` records (one ``bulk_create``, redaction included), off the request path.

Recording is switched on the app's settings object, not with ``override_settings``: a settings change at run time
stops the writer thread (it is how tests keep its commits out of their transactions).

    python bench/bench_insights.py [--questions 60] [--rounds 4] [--batch 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from common import ROOT, print_table

DATABASE = "agent_handshake_bench_insights"


def pct(values: list[float], q: float, scale: float = 1000) -> float:
    return round(float(np.percentile(np.asarray(values) * scale, q)), 2)


def prepare(database: str) -> None:
    os.environ["BENCH_RELAXED_LIMITS"] = "1"
    os.environ["AGENT_HANDSHAKE_INSIGHTS_FLUSH_SECONDS"] = "2"
    from bench_retrieval_quality import fresh_database

    fresh_database(database)
    from common import setup

    setup()
    from django.core.management import call_command

    call_command("loaddata", "demo", verbosity=0)
    call_command("agent_reindex", verbosity=0)


def questions(count: int) -> list[str]:
    from agent_handshake.models import Document

    off_topic = [
        "What is the capital of France?",
        "How do I fix a flat bicycle tire?",
        "Who won the 2018 football world cup?",
        "How do I bake sourdough bread?",
    ]
    titles = list(Document.objects.order_by("pk").values_list("title", flat=True)[: count - len(off_topic)])
    return [f"What should I know about {title}?" for title in titles] + off_topic


def environ(query: str) -> dict:
    from django.test.client import RequestFactory

    body = {"ahp": "0.1", "capability": "content_search", "query": query, "context": {"requesting_agent": "bench"}}
    return (
        RequestFactory()
        .post("/agent/converse", data=json.dumps(body).encode(), content_type="application/json")
        .environ
    )


def timed(handler, env: dict) -> float:
    status: list[str] = []
    began = time.perf_counter()
    response = handler(env, lambda s, h, e=None: status.append(s))
    body = b"".join(response)
    response.close()
    elapsed = time.perf_counter() - began
    assert status[0].startswith("200"), (status, body[:300])
    return elapsed


def compare(handler, queries: list[str], rounds: int) -> dict[bool, list[float]]:
    from agent_handshake.conf import app_settings

    times: dict[bool, list[float]] = {True: [], False: []}

    def run(enabled: bool, query: str) -> None:
        app_settings.INSIGHTS_ENABLED = enabled
        times[enabled].append(timed(handler, environ(query)))

    for query in queries[:10]:  # warm-up
        run(True, query)
        run(False, query)
    times = {True: [], False: []}
    number = 0
    for _ in range(rounds):
        for query in queries:
            for enabled in (True, False) if number % 2 else (False, True):
                run(enabled, query)
            number += 1
    app_settings.reload()
    return times


def request_path_cost(count: int) -> list[float]:
    """Seconds per record for what a request does: open, note, settle, finish (the append under the lock)."""
    from agent_handshake.insights import recording

    samples = []
    for _ in range(count):
        began = time.perf_counter()
        record = recording.begin("ahp", "content_search")
        recording.note(capability="content_search", outcome="success", tokens=0, cached=False, sources=[1, 2, 3])
        record.settle(200, agent_kind="anonymous", address="198.51.100.7")
        recording.finish(record)
        samples.append(time.perf_counter() - began)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--database", default=DATABASE)
    args = parser.parse_args()
    os.chdir(ROOT)
    prepare(args.database)

    from django.core.handlers.wsgi import WSGIHandler

    from agent_handshake.conf import app_settings
    from agent_handshake.insights import recording
    from agent_handshake.models import AgentRequest

    # Recording's own costs first, with no writer thread (it would take the records before flush() is timed).
    app_settings.INSIGHTS_FLUSH_SECONDS = 0
    path = request_path_cost(args.batch)
    began = time.perf_counter()
    stored = recording.flush()
    flushed = time.perf_counter() - began
    assert stored == args.batch, stored
    AgentRequest.objects.all().delete()
    app_settings.reload()

    handler = WSGIHandler()
    queries = questions(args.questions)
    times = compare(handler, queries, args.rounds)
    recorded = len(times[True]) + min(10, len(queries))  # and the warm-up's
    deadline = time.monotonic() + 10
    while AgentRequest.objects.count() < recorded and time.monotonic() < deadline:
        time.sleep(0.2)  # the writer thread's last interval
    written = AgentRequest.objects.count()
    off, on = times[False], times[True]
    ratio = pct(on, 50) / pct(off, 50)
    print_table(
        f"POST /agent/converse with recording off and on ({len(queries)} questions x {args.rounds} rounds each, "
        "alternating, in process)",
        ["recording", "requests", "p50 ms", "p95 ms", "vs off p50"],
        [
            ["off", len(off), pct(off, 50), pct(off, 95), "1.00x"],
            ["on (writer thread every 2 s)", len(on), pct(on, 50), pct(on, 95), f"{ratio:.3f}x"],
        ],
    )
    print(f"rows the writer thread stored, no flush() called: {written} of {recorded}")
    print_table(
        "Recording's own costs",
        ["what", "p50", "p95", "per record"],
        [
            ["a request's record (begin, note, settle, finish)", f"{pct(path, 50, 1e6)} us",
             f"{pct(path, 95, 1e6)} us", ""],
            [f"flush() of {args.batch} records (one bulk insert, off the request path)", f"{flushed * 1000:.1f} ms",
             "", f"{flushed / args.batch * 1e6:.0f} us"],
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
