"""Throughput of /.well-known/agent.json and /llms.txt with a warm cache, next to a plain Django view that
returns a constant string, measured in one run (alternating rounds). Target: at least 0.8 of the constant view.

Both over real HTTP (gunicorn on 127.0.0.1, loaded by wrk or a Python client) and in process (the WSGI handler
called directly). Every request goes through the same middleware stack.

    python bench/bench_documents.py [--seconds 2] [--rounds 5] [--objects 60]
"""

from __future__ import annotations

import argparse

from common import (
    LiveServer,
    http_requests_per_second,
    interleaved,
    load_generator,
    median,
    print_table,
    request_once,
    requests_per_second,
    seed_articles,
    setup,
    wsgi_app,
)

PATHS = {
    "constant view (baseline)": "/constant/",
    "/.well-known/agent.json": "/.well-known/agent.json",
    "/llms.txt": "/llms.txt",
}


def table(title: str, results: dict[str, list[float]], sizes: dict[str, int]) -> None:
    baseline = median(results["constant view (baseline)"])
    rows = [
        [
            name,
            f"{sizes[name]:,} B",
            f"{median(values):,.0f}",
            f"{min(values):,.0f}-{max(values):,.0f}",
            f"{median(values) / baseline:.3f}",
        ]
        for name, values in results.items()
    ]
    print_table(title, ["endpoint", "body", "req/s (median)", "range", "vs constant view"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--objects", type=int, default=60)
    parser.add_argument("--port", type=int, default=8741)
    args = parser.parse_args()
    setup()
    seed_articles(args.objects)

    app = wsgi_app()
    sizes = {}
    for name, path in PATHS.items():
        status, body = request_once(app, path)
        assert status.startswith("200"), (path, status)
        sizes[name] = len(body)

    with LiveServer(args.port) as server:
        for path in PATHS.values():
            http_requests_per_second(server.url + path, 1)  # warm-up: the cache is filled here
        results = interleaved(
            {
                name: (lambda p=path: http_requests_per_second(server.url + p, args.seconds))
                for name, path in PATHS.items()
            },
            args.rounds,
        )
    table(
        f"Over HTTP, warm cache, {args.objects} objects: gunicorn (1 worker, 2 threads), load by {load_generator()}, "
        f"{args.rounds} rounds x {args.seconds}s",
        results,
        sizes,
    )

    results = interleaved(
        {name: (lambda p=path: requests_per_second(app, p, args.seconds / 2)) for name, path in PATHS.items()},
        args.rounds,
    )
    title = f"In process, warm cache: WSGI handler called directly, {args.rounds} rounds x {args.seconds / 2}s"
    table(title, results, sizes)


if __name__ == "__main__":
    main()
