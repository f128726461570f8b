"""NLWeb ``POST /ask`` next to AHP ``POST /agent/converse``, and the event stream's first result, in one run.

Set-up as bench_converse.py: the first ``--seed-docs`` SciFact documents, registered and indexed by the app
(real passages, real MiniLM embeddings). For SciFact's first ``--queries`` queries, through the Django WSGI
handler in process (answer cache off, limits lifted), each p50/p95 in milliseconds:

1. ``/agent/converse`` (content_search) and ``/ask`` (``mode: summarize``: the same retrieval and the same
   answer), taking turns going first. Target: ``/ask`` within 1.1x of converse.
2. ``/ask`` streamed (``Accept: text/event-stream``): the time until the first ``result`` event has been
   produced, against the whole JSON response of the same request. Target: at most 0.5x. Measured twice: with
   the extractive answer (no model: writing the answer is quick, so the sources are most of the time) and
   with an OpenAI-compatible answer backend, a local server answering after ``--model-ms`` (what a model's
   latency looks like; the only thing faked, as in the tests).

    python bench/bench_nlweb.py [--seed-docs 1500] [--queries 100] [--model-ms 300]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from bench_converse import scifact_site
from common import lifted_limits, print_table, scifact_arguments


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000, q)), 1)


def environ(path: str, body: dict, accept: str = "application/json") -> dict:
    from django.test.client import RequestFactory

    request = RequestFactory().post(path, data=json.dumps(body).encode(), content_type="application/json")
    request.environ["HTTP_ACCEPT"] = accept
    return request.environ


def converse_body(query: str) -> dict:
    return {"ahp": "0.1", "capability": "content_search", "query": query}


def ask_body(query: str) -> dict:
    return {"query": {"text": query}, "prefer": {"mode": "summarize"}, "meta": {"api_version": "0.54"}}


def timed(handler, env: dict, first_marker: bytes | None = None) -> tuple[float, float | None]:
    """Seconds to the whole response, and to the first chunk holding ``first_marker`` (if given)."""
    status: list[str] = []
    first = None
    began = time.perf_counter()
    response = handler(env, lambda s, h, e=None: status.append(s))
    chunks = []
    for chunk in response:
        chunks.append(chunk)
        if first is None and first_marker is not None and first_marker in chunk:
            first = time.perf_counter() - began
    if hasattr(response, "close"):
        response.close()
    total = time.perf_counter() - began
    assert status[0].startswith("200"), (status, b"".join(chunks)[:300])
    return total, first


def compare_doors(handler, queries: list[str], backend_cache: dict) -> tuple[list[float], list[float]]:
    converse_times: list[float] = []
    ask_times: list[float] = []

    def converse(query: str) -> None:
        backend_cache.pop(query, None)
        converse_times.append(timed(handler, environ("/agent/converse", converse_body(query)))[0])

    def ask(query: str) -> None:
        backend_cache.pop(query, None)
        ask_times.append(timed(handler, environ("/ask", ask_body(query)))[0])

    for query in queries[:10]:  # warm-up
        converse(query)
        ask(query)
    converse_times.clear()
    ask_times.clear()
    for number, query in enumerate(queries):
        for step in (converse, ask) if number % 2 else (ask, converse):
            step(query)
    return converse_times, ask_times


def compare_stream(handler, queries: list[str], backend_cache: dict) -> tuple[list[float], list[float]]:
    """Whole JSON responses, and the stream's first result, for the queries that have results (a question the
    site has nothing on is answered with none: there is no first result to time)."""
    full_times: list[float] = []
    first_times: list[float] = []

    def full(query: str) -> None:
        backend_cache.pop(query, None)
        full_times.append(timed(handler, environ("/ask", ask_body(query)))[0])

    def streamed(query: str) -> None:
        backend_cache.pop(query, None)
        _, first = timed(handler, environ("/ask", ask_body(query), "text/event-stream"), b"event: result")
        if first is not None:
            first_times.append(first)

    for number, query in enumerate(queries):
        for step in (full, streamed) if number % 2 else (streamed, full):
            step(query)
    return full_times, first_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scifact_arguments(parser, "agent_handshake_bench_nlweb")
    parser.add_argument("--model-ms", type=int, default=300)
    args = parser.parse_args()

    corpus, queries, config = scifact_site(args.database, args.seed_docs, args.queries)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    from agent_handshake.indexing import index_passages
    from agent_handshake.retrieval.embeddings import get_embedding_backend
    from tests.fake_openai import FakeOpenAI

    index_passages(config)
    backend_cache = get_embedding_backend()._cache()[0]
    handler = WSGIHandler()
    relaxed = lifted_limits(settings.AGENT_HANDSHAKE)
    rows = []
    with override_settings(AGENT_HANDSHAKE=relaxed):
        converse_times, ask_times = compare_doors(handler, queries, backend_cache)
        rows.append(["POST /agent/converse", pct(converse_times, 50), pct(converse_times, 95), "1.00x"])
        ratio = pct(ask_times, 50) / pct(converse_times, 50)
        rows.append(["POST /ask (summarize)", pct(ask_times, 50), pct(ask_times, 95), f"{ratio:.2f}x"])
        full, first = compare_stream(handler, queries, backend_cache)
        stream_rows = [
            ["extractive", "whole JSON response", pct(full, 50), pct(full, 95), "1.00x"],
            [
                "extractive",
                "first result event",
                pct(first, 50),
                pct(first, 95),
                f"{pct(first, 50) / pct(full, 50):.2f}x",
            ],
        ]

    model = FakeOpenAI().start()

    def slow_reply(request: dict) -> str:
        time.sleep(args.model_ms / 1000)
        return "The sources say so [1]."

    model.reply = slow_reply
    with_model = {
        **relaxed,
        "ANSWER_BACKEND": "agent_handshake.concierge.backends.OpenAIAnswerer",
        "ANSWER_OPTIONS": {"base_url": model.base_url, "api_key": "bench", "model": "bench", "max_retries": 0},
    }
    try:
        with override_settings(AGENT_HANDSHAKE=with_model):
            few = queries[: max(10, args.queries // 4)]
            full, first = compare_stream(handler, few, backend_cache)
    finally:
        model.stop()
    label = f"model answering in {args.model_ms} ms"
    stream_rows += [
        [label, "whole JSON response", pct(full, 50), pct(full, 95), "1.00x"],
        [label, "first result event", pct(first, 50), pct(first, 95), f"{pct(first, 50) / pct(full, 50):.2f}x"],
    ]
    where = f"{len(corpus):,} SciFact documents, {len(queries)} queries, in process (WSGI handler)"
    print_table(
        f"The same questions through both front doors ({where})",
        ["request", "p50 ms", "p95 ms", "vs converse p50"],
        rows,
    )
    print_table(
        "POST /ask streamed: the first result event against the whole JSON response",
        ["answer backend", "timed until", "p50 ms", "p95 ms", "vs whole p50"],
        stream_rows,
    )


if __name__ == "__main__":
    main()
