"""/llms-full.txt over 10,000 and 100,000 objects: time and peak memory, streamed vs built in memory.

For each size the documents are created in the benchmark database, then each variant runs in a fresh child
process (so peak RSS belongs to that variant alone):
- streamed: GET /llms-full.txt through the WSGI handler, reading and discarding the chunks as a server would;
- built in memory (baseline): the same generator joined into one string, as a non-streaming view would.
Peak RSS growth is VmHWM against the RSS before the request; peak Python heap comes from tracemalloc,
in a second run of the same child.
Target: the streamed variant's peak memory stays flat as the count grows.

    python bench/bench_llms_full.py [--sizes 10000 100000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc

from common import ROOT, print_table, request_once, seed_documents, setup, wsgi_app


def _status_kb(field: str) -> int:
    """A memory figure of this process from /proc/self/status. VmHWM is the peak RSS of this program alone:
    getrusage's ru_maxrss would also carry the parent's peak across fork and exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} is not in /proc/self/status")


def child(variant: str, trace: bool) -> None:
    setup(migrate=False)
    from django.test import RequestFactory

    from agent_handshake import state
    from agent_handshake.llms_txt import iter_llms_full_txt

    app = wsgi_app()
    request_once(app, "/llms.txt")  # imports, URL resolver, database connection: all warm before measuring
    rss_before = _status_kb("VmRSS")
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    if variant == "streamed":
        environ = RequestFactory()._base_environ(PATH_INFO="/llms-full.txt")
        size = 0
        response = app(environ, lambda status, headers, exc_info=None: None)
        for chunk in response:
            size += len(chunk)
        response.close()
    else:
        request = RequestFactory().get("/llms-full.txt")
        size = len("".join(iter_llms_full_txt(state.snapshot(), f"http://{request.get_host()}")).encode())
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    peak_rss_kb = _status_kb("VmHWM")
    print(json.dumps({"seconds": elapsed, "bytes": size, "heap_peak": peak, "rss_growth_kb": peak_rss_kb - rss_before}))


def _run_child(variant: str, *extra: str) -> dict:
    command = [sys.executable, __file__, "--child", variant, *extra]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--child", choices=["streamed", "built"])
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.trace)
        return
    setup()
    rows = []
    for count in args.sizes:
        started = time.perf_counter()
        seed_documents(count)
        print(f"seeded {count:,} documents in {time.perf_counter() - started:.1f}s", flush=True)
        for variant in ("streamed", "built"):
            # Time and RSS from a plain run; the heap peak from a second run under tracemalloc (which slows the
            # run and adds memory of its own).
            result = _run_child(variant)
            result["heap_peak"] = _run_child(variant, "--trace")["heap_peak"]
            rows.append(
                [
                    f"{count:,}",
                    "streamed (the view)" if variant == "streamed" else "built in memory (baseline)",
                    f"{result['bytes'] / 1e6:,.1f} MB",
                    f"{result['seconds']:.2f}",
                    f"{result['bytes'] / 1e6 / result['seconds']:,.0f}",
                    f"{result['heap_peak'] / 1e6:,.1f}",
                    f"{result['rss_growth_kb'] / 1e3:,.1f}",
                ]
            )
    print_table(
        "/llms-full.txt: time and peak memory (each row a fresh process)",
        ["objects", "variant", "body", "seconds", "MB/s", "peak heap MB", "peak RSS growth MB"],
        rows,
    )


if __name__ == "__main__":
    main()
