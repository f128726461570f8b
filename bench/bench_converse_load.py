"""/agent/converse under concurrent clients: gunicorn on 127.0.0.1, N client threads, T seconds.

Run after ``bench_converse.py`` (it answers from that benchmark's indexed database). Three runs: with the
default rate limits (30 requests/minute per IP: every client here shares 127.0.0.1, so most requests are
refused, which is the point of a limit); with the limits, the answer cache and the embedding cache lifted, to
see the server's own throughput; and the same with numpy's BLAS left to its own threads (the baseline of the
embedding backend's ``blas_threads=1``). Reports requests per second, the share of 429 answers, and latency
percentiles of the 200s. The workers share a Redis cache (``--cache-url``, used when reachable; only this
benchmark's ``bench:`` keys are deleted) so that the limits count across them; without one each worker counts on
its own and the table says so.

    python bench/bench_converse_load.py [--clients 4] [--seconds 10] [--workers 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import threading
import time

import numpy as np
import redis
from bench_retrieval_quality import read_jsonl
from common import ROOT, LiveServer, print_table


def load(port: int, queries: list[str], clients: int, seconds: float) -> dict:
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(seed: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.perf_counter() < deadline:
            body = json.dumps({"capability": "content_search", "query": rng.choice(queries)})
            began = time.perf_counter()
            conn.request("POST", "/agent/converse", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - began
            with lock:
                statuses[response.status] = statuses.get(response.status, 0) + 1
                if response.status == 200:
                    latencies.append(elapsed)
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    total = sum(statuses.values())
    return {
        "rps": total / elapsed,
        "ok_rps": statuses.get(200, 0) / elapsed,
        "share_429": statuses.get(429, 0) / total if total else 0.0,
        "other": {code: n for code, n in statuses.items() if code not in (200, 429)},
        "p50": float(np.percentile(latencies, 50) * 1000) if latencies else 0.0,
        "p95": float(np.percentile(latencies, 95) * 1000) if latencies else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8761)
    parser.add_argument("--database", default="agent_handshake_bench_converse")
    parser.add_argument("--cache-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    queries = [q["text"] for q in read_jsonl(str(ROOT.parent / "shared/evaldata/scifact/queries.jsonl"))[:300]]
    env = {"BENCH_DATABASE": args.database}
    cache = "each worker's own memory"
    try:
        client = redis.Redis.from_url(args.cache_url, socket_connect_timeout=1)
        client.ping()
        env["BENCH_CACHE_URL"] = args.cache_url
        cache = f"shared Redis cache {args.cache_url}"
    except redis.RedisError:
        pass
    rows = []
    for label, extra in (
        ("default limits (30/minute per IP)", {}),
        ("limits and caches lifted", {"BENCH_RELAXED_LIMITS": "1"}),
        ("the same, BLAS threads left to numpy", {"BENCH_RELAXED_LIMITS": "1", "BENCH_BLAS_THREADS_DEFAULT": "1"}),
    ):
        with LiveServer(args.port, {**env, **extra}, workers=args.workers) as server:
            load(args.port, queries[:20], args.clients, 3)  # warm-up: the model loaded in every worker
            if "BENCH_CACHE_URL" in env:  # the measured run starts with the whole minute's quota
                for key in client.scan_iter("bench:*"):
                    client.delete(key)
            result = load(args.port, queries, args.clients, args.seconds)
            del server
        rows.append(
            [
                label,
                f"{result['rps']:.1f}",
                f"{result['ok_rps']:.1f}",
                f"{result['share_429'] * 100:.1f} %",
                f"{result['p50']:.0f}",
                f"{result['p95']:.0f}",
                json.dumps(result["other"]) if result["other"] else "-",
            ]
        )
    print_table(
        f"/agent/converse under load: gunicorn {args.workers} workers x 2 threads, {args.clients} clients, "
        f"{args.seconds:.0f}s, extractive answers, rate limits in the {cache}",
        ["run", "req/s", "200/s", "429 share", "p50 ms (200s)", "p95 ms (200s)", "other statuses"],
        rows,
    )


if __name__ == "__main__":
    main()
