"""Middleware cost: requests per second for a 100 KB HTML page with and without the discovery middleware.

Measured twice, each time in alternating rounds so machine noise falls on both variants alike:
- over real HTTP: the project under gunicorn on 127.0.0.1, one server with the middleware and one without,
  loaded by wrk (or a Python client when wrk is not installed), and the latency of one client's sequential
  requests (steadier on a shared 2-core machine, where wrk and the server compete for the cores);
- in process: two Django WSGI handlers called directly, which leaves out the server and network and so
  shows the middleware's own cost at its largest.
Target: at most 5 % slower with the middleware.

    python bench/bench_middleware.py [--seconds 2] [--rounds 5]
"""

from __future__ import annotations

import argparse

from common import (
    LiveServer,
    http_latency_us,
    http_requests_per_second,
    interleaved,
    load_generator,
    median,
    print_table,
    request_once,
    requests_per_second,
    setup,
    wsgi_app,
)

PATH = "/big/?n=95"  # a 99 KB HTML page
WITH, WITHOUT = "with agent_handshake middleware", "without (baseline)"


def table(title: str, results: dict[str, list[float]]) -> float:
    baseline = median(results[WITHOUT])
    rows = [
        [
            name,
            f"{median(values):,.0f}",
            f"{min(values):,.0f}-{max(values):,.0f}",
            f"{median(values) / baseline:.3f}",
        ]
        for name, values in results.items()
    ]
    print_table(title, ["variant", "req/s (median)", "range", "vs baseline"], rows)
    slowdown = 1 - median(results[WITH]) / baseline
    print(f"slowdown: {slowdown * 100:.1f} % (target: at most 5 %)")
    return slowdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=8731)
    args = parser.parse_args()
    setup()
    from django.conf import settings

    from agent_handshake.checks.installation import MIDDLEWARE_PATH

    with_app = wsgi_app(list(settings.MIDDLEWARE))
    without_app = wsgi_app([m for m in settings.MIDDLEWARE if m != MIDDLEWARE_PATH])
    _, with_body = request_once(with_app, PATH)
    _, without_body = request_once(without_app, PATH)
    assert b"ahp-notice" in with_body
    assert b"ahp-notice" not in without_body
    print(f"page: {len(without_body) / 1024:.1f} KB without the middleware, {len(with_body) / 1024:.1f} KB with it")

    with (
        LiveServer(args.port) as served_with,
        LiveServer(args.port + 1, {"BENCH_WITHOUT_AGENT_MIDDLEWARE": "1"}) as served_without,
    ):
        for server in (served_with, served_without):
            http_requests_per_second(server.url + PATH, 1)  # warm-up
        results = interleaved(
            {
                WITHOUT: lambda: http_requests_per_second(served_without.url + PATH, args.seconds),
                WITH: lambda: http_requests_per_second(served_with.url + PATH, args.seconds),
            },
            args.rounds,
        )
        latencies = interleaved(
            {
                WITHOUT: lambda: http_latency_us(served_without.url + PATH, 1000),
                WITH: lambda: http_latency_us(served_with.url + PATH, 1000),
            },
            args.rounds,
        )
    baseline = median(latencies[WITHOUT])
    print_table(
        f"Over HTTP, one client, sequential requests on a keep-alive connection, {args.rounds} rounds x 1000",
        ["variant", "latency us (median)", "range", "vs baseline"],
        [
            [name, f"{median(v):,.0f}", f"{min(v):,.0f}-{max(v):,.0f}", f"{median(v) / baseline:.3f}"]
            for name, v in latencies.items()
        ],
    )
    print(f"added latency: {(median(latencies[WITH]) / baseline - 1) * 100:.1f} %")
    table(
        f"Over HTTP: gunicorn (1 worker, 2 threads), load by {load_generator()}, "
        f"{args.rounds} rounds x {args.seconds}s",
        results,
    )

    for app in (with_app, without_app):
        requests_per_second(app, PATH, 0.5)  # warm-up
    results = interleaved(
        {
            WITHOUT: lambda: requests_per_second(without_app, PATH, args.seconds / 2),
            WITH: lambda: requests_per_second(with_app, PATH, args.seconds / 2),
        },
        args.rounds,
    )
    table(f"In process: WSGI handler called directly, {args.rounds} rounds x {args.seconds / 2}s", results)


if __name__ == "__main__":
    main()
