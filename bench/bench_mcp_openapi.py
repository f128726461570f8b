"""MCP ``tools/call`` and OpenAPI's ``POST /capabilities/<name>`` next to AHP ``POST /agent/converse`` for the same
capability and input, and the generated documents warm, in one run.

Set-up as bench_converse.py: the first ``--seed-docs`` SciFact documents, registered and indexed by the app (real
passages, real MiniLM embeddings), answer cache off, limits lifted, through the Django WSGI handler in process.
Each p50/p95 in milliseconds, the three front doors taking turns going first:

1. ``content_search`` (MODE2) for SciFact's first ``--queries`` queries: retrieval and an extractive answer;
2. ``bench_lookup``, a MODE3 ``query`` capability registered here (input checked against its schema, a handler
   that reads one row, output checked): what each door adds around the concierge, with little work inside.
   Target for both: MCP and the capability operation within 1.1x of converse.
3. ``tools/list`` (MCP) and ``GET /openapi.json`` warm (built once, then served from the cache like the manifest)
   against ``GET /.well-known/agent.json`` warm.

    python bench/bench_mcp_openapi.py [--seed-docs 1500] [--queries 100] [--rounds 300]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from bench_converse import scifact_site
from common import lifted_limits, print_table, scifact_arguments


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000, q)), 2)


def environ(method: str, path: str, body: dict | None = None) -> dict:
    from django.test.client import RequestFactory

    factory = RequestFactory()
    if method == "GET":
        return factory.get(path).environ
    return factory.post(path, data=json.dumps(body).encode(), content_type="application/json").environ


def timed(handler, env: dict, expect: str = "200") -> float:
    status: list[str] = []
    began = time.perf_counter()
    response = handler(env, lambda s, h, e=None: status.append(s))
    body = b"".join(response)
    if hasattr(response, "close"):
        response.close()
    elapsed = time.perf_counter() - began
    assert status[0].startswith(expect), (status, body[:300])
    assert b'"isError":true' not in body.replace(b" ", b""), body[:300]
    return elapsed


def requests_for(capability: str, query: str, arguments: dict) -> dict[str, tuple[str, dict]]:
    converse = {"ahp": "0.1", "capability": capability, "query": query}
    if arguments:
        converse["context"] = {"input": arguments}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": capability, "arguments": {"query": query, **arguments}}}  # fmt: skip
    return {
        "POST /agent/converse": ("/agent/converse", converse),
        "MCP tools/call": ("/mcp", call),
        f"POST /capabilities/{capability}": (f"/capabilities/{capability}", {"query": query, **arguments}),
    }


def compare(handler, work: list[tuple[str, str, dict]], backend_cache: dict) -> dict[str, list[float]]:
    """Each (capability, query, arguments) through the three doors in turns, after a warm-up of ten."""
    times: dict[str, list[float]] = {}
    for number, (capability, query, arguments) in enumerate(work):
        doors = list(requests_for(capability, query, arguments).items())
        shift = number % len(doors)
        for label, (path, body) in doors[shift:] + doors[:shift]:
            backend_cache.pop(query, None)
            elapsed = timed(handler, environ("POST", path, body))
            if number >= 10:
                times.setdefault(label, []).append(elapsed)
    return times


def rows_of(times: dict[str, list[float]], baseline: str) -> list[list[object]]:
    """The baseline first, then the others, each p50 against the baseline's."""
    base = pct(times[baseline], 50)
    order = [baseline, *sorted(label for label in times if label != baseline)]
    return [
        [label, pct(times[label], 50), pct(times[label], 95), f"{pct(times[label], 50) / base:.2f}x"] for label in order
    ]


def register_lookup() -> None:
    """``bench_lookup``: a MODE3 ``query`` capability with one input field and a handler that reads one row."""
    from agent_handshake import Capability, Outcome
    from agent_handshake.models import Document
    from agent_handshake.registry import capability_registry

    def lookup(invocation) -> Outcome:
        document = Document.objects.filter(title__gte=invocation.input["title"]).order_by("title").first()
        return Outcome({"title": document.title, "url": document.url}, answer=f"Found {document.title}.")

    capability_registry.register(
        Capability(
            name="bench_lookup",
            description="The first document at or after a title.",
            mode="MODE3",
            action_type="query",
            response_types=["application/data", "text/answer"],
            input_schema={"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}},
            output_schema={
                "type": "object",
                "required": ["title", "url"],
                "properties": {"title": {"type": "string"}, "url": {"type": "string"}},
            },
            handler=lookup,
            intent="Look up a document by its title",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scifact_arguments(parser, "agent_handshake_bench_mcp")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()

    corpus, queries, config = scifact_site(args.database, args.seed_docs, args.queries)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    from agent_handshake.indexing import index_passages
    from agent_handshake.retrieval.embeddings import get_embedding_backend

    index_passages(config)

    register_lookup()
    backend_cache = get_embedding_backend()._cache()[0]
    handler = WSGIHandler()
    relaxed = lifted_limits(settings.AGENT_HANDSHAKE)
    titles = [row["title"][:20] for row in corpus[: args.queries]]
    with override_settings(AGENT_HANDSHAKE=relaxed):
        search = compare(handler, [("content_search", query, {}) for query in queries], backend_cache)
        lookups = [("bench_lookup", f"look up {title}", {"title": title}) for title in titles]
        mode3 = compare(handler, lookups, backend_cache)
        documents = {  # a fresh environ each time: a request body is read once
            "GET /.well-known/agent.json": lambda: environ("GET", "/.well-known/agent.json"),
            "MCP tools/list": lambda: environ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            "GET /openapi.json": lambda: environ("GET", "/openapi.json"),
        }
        began = time.perf_counter()
        timed(handler, documents["GET /openapi.json"]())
        cold = time.perf_counter() - began
        warm: dict[str, list[float]] = {label: [] for label in documents}
        for _ in range(args.rounds):
            for label, make in documents.items():
                warm[label].append(timed(handler, make()))
    where = f"{len(corpus):,} SciFact documents, in process (WSGI handler)"
    header = ["request", "p50 ms", "p95 ms", "vs converse p50"]
    print_table(f"content_search, {len(queries) - 10} queries through three front doors ({where})", header,
                rows_of(search, "POST /agent/converse"))  # fmt: skip
    print_table(f"bench_lookup (MODE3 query), {len(titles) - 10} inputs through three front doors", header,
                rows_of(mode3, "POST /agent/converse"))  # fmt: skip
    print_table(
        f"The generated documents, warm ({args.rounds} rounds; /openapi.json built once first: {cold * 1000:.0f} ms)",
        ["request", "p50 ms", "p95 ms", "vs agent.json p50"],
        rows_of(warm, "GET /.well-known/agent.json"),
    )


if __name__ == "__main__":
    main()
