"""Shared by the benchmarks: Django set-up, an in-process WSGI driver, and table printing."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup(migrate: bool = True) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def wsgi_app(middleware: list[str] | None = None):
    """A WSGI handler built with ``middleware`` (default: the settings' list)."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    if middleware is None:
        return WSGIHandler()
    with override_settings(MIDDLEWARE=middleware):
        return WSGIHandler()


def request_once(app, path: str, headers: dict[str, str] | None = None) -> tuple[str, bytes]:
    from django.test.client import RequestFactory

    environ = RequestFactory()._base_environ(PATH_INFO=path.split("?")[0], QUERY_STRING=path.partition("?")[2])
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    status = []

    def start_response(s, h, exc_info=None):
        status.append(s)

    response = app(environ, start_response)
    body = b"".join(response)
    if hasattr(response, "close"):
        response.close()
    return status[0], body


def requests_per_second(app, path: str, seconds: float, headers: dict[str, str] | None = None) -> float:
    count = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        request_once(app, path, headers)
        count += 1
    return count / (time.perf_counter() - started)


def interleaved(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run each variant once per round, alternating, so machine noise falls on all of them alike."""
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            results[name].append(run())
    return results


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(title: str, header: list[str], rows: list[list[object]]) -> None:
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))


class LiveServer:
    """The project under gunicorn on 127.0.0.1 (one worker process), for measurements over real HTTP; with
    ``server="runserver"``, under Django's development server instead (threaded, what ``make demo`` runs)."""

    def __init__(
        self,
        port: int,
        env: dict[str, str] | None = None,
        threads: int = 2,
        workers: int = 1,
        server: str = "gunicorn",
        quiet: bool = False,
    ) -> None:
        import subprocess

        self.url = f"http://127.0.0.1:{port}"
        if server == "runserver":
            command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"]
        else:
            command = [
                sys.executable,
                "-m",
                "gunicorn",
                "bench.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
                "--worker-class",
                "gthread",
                "--threads",
                str(threads),
                "--log-level",
                "warning",
                "--keep-alive",
                "5",
            ]
        output = subprocess.DEVNULL if quiet else None  # e.g. runserver's line per request
        self.process = subprocess.Popen(
            command,
            stdout=output,
            stderr=output,
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", **(env or {})},
        )
        self._wait()

    def _wait(self) -> None:
        import urllib.request

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/constant/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer on {self.url}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def http_requests_per_second(url: str, seconds: float, connections: int = 4) -> float:
    """Requests per second that a load generator gets from ``url``: wrk when installed, else a Python client."""
    import shutil
    import subprocess

    if shutil.which("wrk"):
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in out.splitlines():
            if line.startswith("Requests/sec:"):
                return float(line.split()[1])
        raise RuntimeError(f"could not read wrk's output:\n{out}")
    return _python_client_rps(url, seconds, connections)


def _python_client_rps(url: str, seconds: float, connections: int) -> float:
    import http.client
    import threading
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    counts = [0] * connections
    deadline = time.perf_counter() + seconds

    def worker(index: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        while time.perf_counter() < deadline:
            conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
            conn.getresponse().read()
            counts[index] += 1
        conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def load_generator() -> str:
    import shutil

    return "wrk" if shutil.which("wrk") else "Python http.client threads (install wrk for less client overhead)"


PARAGRAPH = (
    "Water just off the boil draws out the malty depth of an Assam, while a green tea wants 75 to 80 degrees "
    "and a gentle pour. Weigh the leaf: two and a half grams for every 200 millilitres is a fair start. "
)


def seed_documents(count: int, batch: int = 5000) -> None:
    """``count`` agent documents for the test app's Article model (what llms-full.txt streams), made fast with
    bulk_create; any documents already there are replaced."""
    from django.contrib.contenttypes.models import ContentType

    from agent_handshake import state
    from agent_handshake.models import Document
    from tests.testapp.models import Article

    content_type = ContentType.objects.get_for_model(Article)
    Document.objects.all().delete()
    body = "## Brewing\n\n" + PARAGRAPH * 6 + "\n\n## Storing\n\n" + PARAGRAPH * 4
    for start in range(0, count, batch):
        Document.objects.bulk_create(
            Document(
                content_type=content_type,
                object_id=str(n),
                url=f"/articles/note-{n}/",
                path=f"/articles/note-{n}/",
                title=f"Brewing note {n}",
                summary=f"What we learned from tasting number {n}.",
                markdown=body,
                schema_type="Article",
                content_hash=f"{n:064d}",
            )
            for n in range(start, min(count, start + batch))
        )
    state.invalidate()


def seed_articles(count: int) -> None:
    """``count`` real Article rows, indexed through the app's own reindex code."""
    from agent_handshake.indexing import reindex_model
    from agent_handshake.models import Document
    from agent_handshake.registry import content_registry
    from tests.testapp.models import Article

    Document.objects.all().delete()
    Article.objects.all().delete()
    Article.objects.bulk_create(
        Article(title=f"Brewing note {n}", slug=f"note-{n}", summary=f"Tasting {n}.", body=PARAGRAPH * 8)
        for n in range(count)
    )
    reindex_model(content_registry.get_config(Article))


def http_latency_us(url: str, requests: int) -> float:
    """Median latency in microseconds of ``requests`` sequential GETs on one keep-alive connection."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    timings = []
    for _ in range(requests):
        started = time.perf_counter()
        conn.request("GET", target)
        conn.getresponse().read()
        timings.append(time.perf_counter() - started)
    conn.close()
    return statistics.median(timings) * 1e6


def lifted_limits(site_settings: dict) -> dict:
    """The site's ``AGENT_HANDSHAKE`` with every rate limit and budget lifted and the answer cache off: what a
    latency benchmark times is the work, not the 429s."""
    return {
        **site_settings,
        "RATE_LIMITS": {"unauthenticated": {"requests": "1000000/minute", "token_budget": "5000000/session"}},
        "AGENT_RATE_LIMIT": "1000000/minute",
        "ACTION_RATE_LIMIT": "1000000/minute",
        "DAILY_TOKEN_BUDGET_PER_IP": 0,
        "ANSWER_CACHE_TIMEOUT": 0,
    }


def scifact_arguments(parser, database: str) -> None:
    """The arguments of the benchmarks that run on bench_converse.scifact_site."""
    parser.add_argument("--seed-docs", type=int, default=1500)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--database", default=database)
