"""/agent/converse latency at 10,000 and 100,000 passages, next to its parts, measured in one run.

Set-up: the first ``--seed-docs`` SciFact documents are loaded as a registered model and indexed by the app
(real passages, real MiniLM embeddings). To reach each size, those passages are copied with a little Gaussian
noise added to their vectors (renormalised) so the HNSW graph sees distinct points; the copies keep their text,
so full-text matching is, if anything, harder than on a real corpus of that size (each word matches more rows).

For SciFact's first ``--queries`` queries, three things are timed, each as p50/p95 in milliseconds:
- the query embedding alone (MiniLM, in process);
- the retrieval SQL alone (vector candidates + full-text candidates, as HybridRetriever runs them);
- POST /agent/converse through the Django WSGI handler (extractive answer, answer cache off), end to end.
Target: converse p50 no more than 1.5 x (embedding + SQL) p50, and under 100 ms at 100,000 passages.

The full-text side ranks only the passages of the query's rarest words (``MAX_RANKED_ROWS``); the time it takes
is shown next to ranking every matching passage.

Then the indexing cost: passages per second while indexing, and one object's re-index after a save.

    python bench/bench_converse.py [--sizes 10000 100000] [--seed-docs 1500] [--queries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from bench_retrieval_quality import fresh_database, read_jsonl
from common import ROOT, print_table

SCIFACT = ROOT.parent / "shared" / "evaldata" / "scifact"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def grow_passages(target: int, rng: np.random.Generator) -> None:
    """Copy the indexed passages (with noisy vectors) until there are ``target`` of them."""
    from django.contrib.postgres.search import SearchVector
    from django.db import connection
    from django.db.models import Max

    from agent_handshake.conf import app_settings
    from agent_handshake.models import Passage
    from agent_handshake.retrieval.index import (
        ensure_vector_index,
        refresh_lexeme_stats,
        vector_index_name,
        write_postings,
    )

    count = Passage.objects.count()
    if count >= target:
        return
    originals = list(
        Passage.objects.filter(position__lt=1000).values(
            "document_id", "position", "heading", "text", "title", "model_label", "ahp_content_type", "embedding"
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {vector_index_name(384)}")
    copy = Passage.objects.aggregate(top=Max("position"))["top"] // 1000 + 1
    config = app_settings.SEARCH_CONFIG
    while count < target:
        batch = originals[: min(len(originals), target - count)]
        vectors = np.stack([np.asarray(row["embedding"], dtype=np.float32) for row in batch])
        vectors += rng.normal(0, 0.03, vectors.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        created = Passage.objects.bulk_create(
            [
                Passage(
                    document_id=row["document_id"],
                    position=row["position"] + 1000 * copy,
                    heading=row["heading"],
                    text=row["text"],
                    title=row["title"],
                    model_label=row["model_label"],
                    ahp_content_type=row["ahp_content_type"],
                    embedding=vector.tolist(),
                )
                for row, vector in zip(batch, vectors, strict=True)
            ],
            batch_size=2000,
        )
        written = Passage.objects.filter(pk__in=[p.pk for p in created])
        written.update(
            search_vector=SearchVector("title", weight="A", config=config)
            + SearchVector("heading", weight="B", config=config)
            + SearchVector("text", weight="C", config=config)
        )
        write_postings(written)
        count += len(created)
        copy += 1
    started = time.perf_counter()
    ensure_vector_index(384)
    refresh_lexeme_stats()  # the copies' words count in the document frequencies, as after agent_reindex
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")
        cursor.execute("ANALYZE agent_handshake_posting")
    print(f"  {target:,} passages; HNSW index built in {time.perf_counter() - started:.0f}s", flush=True)


def converse_environ(query: str) -> dict:
    from django.test.client import RequestFactory

    body = json.dumps({"ahp": "0.1", "capability": "content_search", "query": query}).encode()
    request = RequestFactory().post("/agent/converse", data=body, content_type="application/json")
    return request.environ


def measure(queries: list[str], handler, retriever, scope, no_reader: dict) -> dict[str, list[float]]:
    """Seconds per query: the embedding alone, the retrieval SQL alone, POST /agent/converse, the same without the
    reader (``no_reader``: settings naming a directory without its files), and the reader alone (its candidates'
    count in ``pairs``)."""
    from django.test import override_settings

    from agent_handshake.concierge.answering import ContentConcierge
    from agent_handshake.concierge.backends import passages_of
    from agent_handshake.concierge.reading import _scores, read

    embed_times: list[float] = []
    sql_times: list[float] = []
    converse_times: list[float] = []
    plain_times: list[float] = []
    read_times: list[float] = []
    pairs: list[float] = []
    concierge = ContentConcierge(retriever)
    backend = retriever.backend
    for query in queries[:10]:  # warm-up: caches, connections, plans
        handler(converse_environ(query), lambda *a: None)
    backend_cache = backend._cache()[0]

    def parts(query: str) -> None:
        backend_cache.pop(query, None)
        began = time.perf_counter()
        vector = backend.embed_query(query)
        embed_times.append(time.perf_counter() - began)
        began = time.perf_counter()
        retriever.vector_candidates(vector, scope, retriever.candidates)
        retriever.text_candidates(query, scope, retriever.candidates)
        sql_times.append(time.perf_counter() - began)

    def timed_converse(query: str, times: list[float]) -> None:
        backend_cache.pop(query, None)
        _scores.cache_clear()  # the reader's scores of this question, kept by an earlier step, are not reused
        began = time.perf_counter()
        status: list[str] = []
        body = b"".join(handler(converse_environ(query), lambda s, h, e=None, out=status: out.append(s)))
        times.append(time.perf_counter() - began)
        assert status[0].startswith("200"), (status, body[:300])

    def converse(query: str) -> None:
        timed_converse(query, converse_times)

    def without_reader(query: str) -> None:
        with override_settings(AGENT_HANDSHAKE=no_reader):
            timed_converse(query, plain_times)

    def reader_alone(query: str) -> None:
        hits = retriever.search_documents(query, limit=concierge.sources_limit, filters=scope)
        passages = passages_of(concierge.evidence(hits))
        _scores.cache_clear()
        began = time.perf_counter()
        reading = read(query, passages)
        read_times.append(time.perf_counter() - began)
        pairs.append(len(reading.scores) if reading else 0)

    # Whichever runs first may find the query's rows in PostgreSQL's buffers: take turns going first.
    steps = [parts, converse, without_reader, reader_alone]
    for number, query in enumerate(queries):
        for step in steps[number % len(steps) :] + steps[: number % len(steps)]:
            step(query)
    return {
        "embed": embed_times,
        "sql": sql_times,
        "converse": converse_times,
        "without reader": plain_times,
        "reader": read_times,
        "pairs": pairs,
    }


def text_side(queries: list[str], retriever, scope, settings: dict) -> tuple[list[float], list[float]]:
    """Seconds per query of the full-text candidates: within MAX_RANKED_ROWS, and ranking every match."""
    from django.test import override_settings

    budgeted_times: list[float] = []
    exhaustive_times: list[float] = []

    def budgeted(query: str) -> None:
        began = time.perf_counter()
        retriever.text_candidates(query, scope, retriever.candidates)
        budgeted_times.append(time.perf_counter() - began)

    def exhaustive(query: str) -> None:
        with override_settings(AGENT_HANDSHAKE={**settings, "MAX_RANKED_ROWS": 10**9}):
            began = time.perf_counter()
            retriever.text_candidates(query, scope, retriever.candidates)
            exhaustive_times.append(time.perf_counter() - began)

    for number, query in enumerate(queries):
        for step in (budgeted, exhaustive) if number % 2 else (exhaustive, budgeted):
            step(query)
    return budgeted_times, exhaustive_times


def filtered_reads(queries: list[str], retriever, scope, size: int) -> list[list[str]]:
    """The vector side under a selective filter (the passages of 1, 10 or 100 documents: as few as a site's
    ``site_info`` pages), read three ways, taking turns going first: the HNSW graph alone (an iterative scan, which
    gives up at ``hnsw.max_scan_tuples``), exactly (every passage that passes the filter compared), and as searches
    read it (the graph, then exactly when the graph came back short). Recall is against the exact read's ids."""
    import dataclasses

    from agent_handshake.models import Document, Passage

    table = []
    documents = list(Document.objects.order_by("pk").values_list("pk", flat=True))
    vectors = [retriever.backend.embed_query(query) for query in queries[:30]]
    limit = retriever.candidates
    for count in (1, 10, 100):
        filters = dataclasses.replace(scope, documents=documents[:count])
        passing = Passage.objects.filter(document_id__in=documents[:count]).count()
        times: dict[str, list[float]] = {"graph": [], "exact": [], "auto": []}
        recall: dict[str, list[float]] = {"graph": [], "exact": [], "auto": []}
        for number, vector in enumerate(vectors):
            found = {}
            order = list(times)[number % 3 :] + list(times)[: number % 3]
            for read in order:
                began = time.perf_counter()
                found[read] = {pid for pid, _ in retriever.vector_candidates(vector, filters, limit, read=read)}
                times[read].append(time.perf_counter() - began)
            for read in times:
                recall[read].append(len(found[read] & found["exact"]) / max(1, len(found["exact"])))
        for read, label in (("graph", "HNSW graph alone"), ("exact", "exact"), ("auto", "as searches read")):
            table.append(
                [
                    f"{size:,}",
                    f"{count} ({passing:,} passages)",
                    label,
                    f"{pct(times[read], 50):.1f}",
                    f"{pct(times[read], 95):.1f}",
                    f"{statistics.mean(recall[read]):.2f}",
                ]
            )
    return table


def scifact_site(database: str, seed_docs: int, queries: int) -> tuple[list[dict], list[str], object]:
    """A fresh bench database with Django set up, the first ``seed_docs`` SciFact documents loaded as the
    registered ``BeirDocument`` model (documents synced, passages not yet indexed), and the first ``queries``
    query texts. Returns (corpus rows, query texts, the model's ContentConfig)."""
    fresh_database(database)
    os.environ["BENCH_DATABASE"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from agent_handshake.indexing import reindex_model
    from agent_handshake.registry import content_registry
    from bench.beirapp.models import BeirDocument

    call_command("migrate", verbosity=0)
    corpus = read_jsonl(str(SCIFACT / "corpus.jsonl"))[:seed_docs]
    texts = [q["text"] for q in read_jsonl(str(SCIFACT / "queries.jsonl"))[:queries]]
    BeirDocument.objects.bulk_create(BeirDocument(doc_id=r["_id"], title=r["title"], text=r["text"]) for r in corpus)
    config = content_registry.get_config(BeirDocument)
    reindex_model(config)
    return corpus, texts, config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed-docs", type=int, default=1500)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--database", default="agent_handshake_bench_converse")
    args = parser.parse_args()

    corpus, queries, config = scifact_site(args.database, args.seed_docs, args.queries)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    from agent_handshake.conf import app_settings
    from agent_handshake.indexing import index_passages, sync_and_index
    from agent_handshake.models import Passage
    from agent_handshake.registry import capability_registry
    from agent_handshake.retrieval.embeddings import get_embedding_backend
    from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
    from bench.beirapp.models import BeirDocument

    started = time.perf_counter()
    index_passages(config)
    index_seconds = time.perf_counter() - started
    seeded = Passage.objects.count()
    print(f"indexed {len(corpus):,} documents, {seeded:,} passages in {index_seconds:.1f}s", flush=True)

    # One object's re-index after a save: the document, its passages, and their embeddings.
    backend = get_embedding_backend()
    document = BeirDocument.objects.first()
    saves = []
    for n in range(5):
        BeirDocument.objects.filter(pk=document.pk).update(text=f"{document.text} Revision {n}.")
        began = time.perf_counter()
        sync_and_index("beirapp", "beirdocument", document.pk)
        saves.append(time.perf_counter() - began)
    # The same text once more: the embeddings come from the cache, as after an unrelated field's edit.
    BeirDocument.objects.filter(pk=document.pk).update(text=document.text)
    sync_and_index("beirapp", "beirdocument", document.pk)
    BeirDocument.objects.filter(pk=document.pk).update(text=f"{document.text} Revision 4.")
    began = time.perf_counter()
    sync_and_index("beirapp", "beirdocument", document.pk)
    cached_save = time.perf_counter() - began

    retriever = HybridRetriever(backend)
    # The SQL alone runs with the filter content_search applies (its registered models), as converse does.
    scope = Filters(models=list(capability_registry.get("content_search").models))
    handler = WSGIHandler()
    rng = np.random.default_rng(7)
    rows = []
    filtered: list[list[str]] = []
    relaxed = {
        **settings.AGENT_HANDSHAKE,
        "RATE_LIMITS": {"unauthenticated": {"requests": "1000000/minute", "token_budget": "5000/session"}},
        "AGENT_RATE_LIMIT": "1000000/minute",
        "ANSWER_CACHE_TIMEOUT": 0,
    }
    for size in args.sizes:
        grow_passages(size, rng)
        no_reader = {**relaxed, "READER_MODEL_DIR": str(ROOT / "bench" / "data")}  # no model.onnx there
        with override_settings(AGENT_HANDSHAKE=relaxed):
            times = measure(queries, handler, retriever, scope, no_reader)
        embed_times, sql_times, converse_times = times["embed"], times["sql"], times["converse"]
        # What the full-text budget saves: the text side alone, budgeted and ranking every match, taking turns
        # going first. (What it costs in quality is measured where passages are not copies of each other:
        # bench_retrieval_quality.py with MAX_RANKED_ROWS at the same share of the corpus; README.)
        budgeted_times, exhaustive_times = text_side(queries, retriever, scope, relaxed)
        filtered.extend(filtered_reads(queries, retriever, scope, size))
        parts_p50 = statistics.median(embed_times) + statistics.median(sql_times)
        for name, measured in (("query embedding alone", embed_times), ("retrieval SQL alone", sql_times),
                               ("POST /agent/converse (extractive, with the reader)", converse_times),
                               ("POST /agent/converse without the reader", times["without reader"]),
                               ("the reader alone (on the top documents)", times["reader"])):  # fmt: skip
            rows.append([f"{size:,}", name, f"{pct(measured, 50):.1f}", f"{pct(measured, 95):.1f}"])
        per_pair = statistics.median(t / n for t, n in zip(times["reader"], times["pairs"], strict=True) if n)
        rows.append([f"{size:,}", f"reader per candidate (median {statistics.median(times['pairs']):.0f} read)",
                     f"{per_pair * 1000:.1f}", ""])  # fmt: skip
        ratio = statistics.median(converse_times) / parts_p50
        rows.append([f"{size:,}", "converse p50 / (embedding p50 + SQL p50)", f"{ratio:.2f}x", ""])
        for name, times in ((f"full text alone, MAX_RANKED_ROWS={app_settings.MAX_RANKED_ROWS}", budgeted_times),
                            ("full text alone, ranking every match", exhaustive_times)):  # fmt: skip
            rows.append([f"{size:,}", name, f"{pct(times, 50):.1f}", f"{pct(times, 95):.1f}"])
    print_table(
        f"/agent/converse latency, {len(queries)} SciFact queries, in process (ms)",
        ["passages", "measured", "p50", "p95"],
        rows,
    )
    print_table(
        f"The vector side filtered to a few documents' passages, {len(queries[:30])} queries (ms; recall vs exact)",
        ["passages", "documents", "read", "p50", "p95", "recall"],
        filtered,
    )
    print_table(
        "Indexing with the default model (MiniLM on numpy)",
        ["measured", "value"],
        [
            ["passages per second (agent_reindex)", f"{seeded / index_seconds:.1f}"],
            ["one object re-indexed after a save, median of 5 (ms)", f"{statistics.median(saves) * 1000:.0f}"],
            ["the same, passage text already embedded (ms)", f"{cached_save * 1000:.0f}"],
        ],
    )


if __name__ == "__main__":
    main()
