"""Retrieval quality on a BEIR-format set: nDCG@10 and Recall@100 for full text alone, vectors alone and fused.

The corpus is loaded into a fresh database as a registered model (``bench.beirapp``), indexed by the app's own
``agent_reindex`` code (passages, embeddings, full-text vectors), and every query goes through
``HybridRetriever.search_documents`` — the path ``POST /agent/converse`` uses — in each mode. One table.

    python bench/bench_retrieval_quality.py CORPUS QUERIES QRELS [--max-queries N] [--keep]
    python bench/bench_retrieval_quality.py ../shared/evaldata/scifact/corpus.jsonl \\
        ../shared/evaldata/scifact/queries.jsonl ../shared/evaldata/scifact/qrels/train.tsv

Files may be gzipped. Relevance grades from the qrels are the gains (BEIR's binary sets: 0/1). As in BEIR's
evaluation, a document whose id equals the query's id is dropped from that query's ranking.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from common import ROOT, print_table


def _open(path: str):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def read_jsonl(path: str) -> list[dict]:
    with _open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with _open(path) as handle:
        reader = csv.reader(handle, delimiter="\t")
        for row in reader:
            if not row or row[0] in ("query-id", "query_id"):
                continue
            query_id, doc_id, score = row[0], row[1], int(row[2])
            if score > 0:
                qrels[query_id][doc_id] = score
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def fresh_database(name: str) -> None:
    """Drop and create the benchmark database in the embedded server (or the DATABASE_URL server)."""
    os.environ["BENCH_DATABASE"] = name
    import psycopg

    from agent_handshake.embedded import database_config

    config = database_config(ROOT, name="postgres")
    params = {"host": config["HOST"], "user": config["USER"], "dbname": "postgres", "autocommit": True}
    if config.get("PORT"):
        params["port"] = config["PORT"]
    if config.get("PASSWORD"):
        params["password"] = config["PASSWORD"]
    with psycopg.connect(**params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("queries")
    parser.add_argument("qrels")
    parser.add_argument("--max-queries", type=int, default=0, help="evaluate only the first N judged queries")
    parser.add_argument("--database", default="agent_handshake_beir")
    parser.add_argument("--keep", action="store_true", help="reuse the indexed database of an earlier run")
    parser.add_argument(
        "--fusion-study",
        action="store_true",
        help="also compare fusions (RRF, min-max score combinations) and document aggregations (max, sum of top k)",
    )
    parser.add_argument("--text-weight", type=float, help="override TEXT_WEIGHT (fusion)")
    parser.add_argument("--vector-weight", type=float, help="override VECTOR_WEIGHT (fusion)")
    parser.add_argument("--rrf-k", type=int, help="override RRF_K")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="KEY=JSON", help="override an AGENT_HANDSHAKE setting"
    )
    parser.add_argument(
        "--modes", nargs="+", default=["text", "vector", "hybrid"], choices=["text", "vector", "hybrid"]
    )
    args = parser.parse_args()

    if not args.keep:
        fresh_database(args.database)
    os.environ["BENCH_DATABASE"] = args.database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    if args.setting:
        from django.conf import settings
        from django.test import override_settings

        overrides = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.setting)}
        override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, **overrides}).enable()
    from django.core.management import call_command

    from agent_handshake.indexing import index_passages, reindex_model
    from agent_handshake.registry import content_registry
    from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
    from agent_handshake.retrieval.index import refresh_lexeme_stats
    from bench.beirapp.models import BeirDocument

    call_command("migrate", verbosity=0)
    corpus = read_jsonl(args.corpus)
    qrels = read_qrels(args.qrels)
    queries = [q for q in read_jsonl(args.queries) if q["_id"] in qrels]
    if args.max_queries:
        queries = queries[: args.max_queries]
    name = Path(args.corpus).parent.name or Path(args.corpus).stem
    config = content_registry.get_config(BeirDocument)

    started = time.perf_counter()
    reused = args.keep and BeirDocument.objects.exists()
    if not reused:
        BeirDocument.objects.bulk_create(
            (BeirDocument(doc_id=row["_id"], title=row.get("title", ""), text=row.get("text", "")) for row in corpus),
            batch_size=2000,
        )
        reindex_model(config)

        def progress(done: int, total: int) -> None:
            if done == total or done % 500 < 64:
                elapsed = time.perf_counter() - started
                print(f"\rindexed {done}/{total} documents ({elapsed:.0f}s)", end="", file=sys.stderr, flush=True)

        index_passages(config, progress=progress)
        print(file=sys.stderr)
    refresh_lexeme_stats()  # as agent_reindex does at its end
    indexed = "index reused" if reused else f"indexed in {time.perf_counter() - started:.0f}s"
    doc_ids = dict(BeirDocument.objects.values_list("pk", "doc_id"))
    from agent_handshake.models import Document, Passage

    url_to_doc = {url: doc_ids[int(oid)] for url, oid in Document.objects.values_list("url", "object_id")}
    passages = Passage.objects.count()

    retriever = HybridRetriever(text_weight=args.text_weight, vector_weight=args.vector_weight, rrf_k=args.rrf_k)
    filters = Filters(models=[config.label])
    totals = {mode: {"ndcg": 0.0, "recall": 0.0, "seconds": 0.0} for mode in args.modes}
    # The relevance floor is not part of the ranking measured here (ContentConcierge applies it to answers), but
    # every judged query is on the corpus's topic: the floor should refuse (almost) none of them.
    floor = retriever.relevance_floor
    under_floor = 0
    for number, query in enumerate(queries, start=1):
        vector = retriever.backend.embed_query(query["text"])
        relevant = qrels[query["_id"]]
        nearest = retriever.vector_candidates(vector, filters, 1)
        under_floor += bool(floor and nearest and nearest[0][1] < floor)
        for mode, total in totals.items():
            began = time.perf_counter()
            hits = retriever.search_documents(query["text"], limit=100, filters=filters, mode=mode, query_vector=vector)
            total["seconds"] += time.perf_counter() - began
            # As BEIR does (ignore_identical_ids): a query that is itself a corpus document (ArguAna) must not
            # be rewarded or punished for finding itself.
            ranked = [doc for doc in (url_to_doc[hit.url] for hit in hits) if doc != query["_id"]]
            total["ndcg"] += ndcg_at(ranked, relevant, 10)
            total["recall"] += recall_at(ranked, relevant, 100)
        if number % 100 == 0:
            print(f"\r{number}/{len(queries)} queries", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    count = len(queries) or 1
    labels = {"text": "full text alone", "vector": "vectors alone", "hybrid": "fused (RRF)"}
    rows = [
        [
            labels[mode],
            f"{total['ndcg'] / count:.3f}",
            f"{total['recall'] / count:.3f}",
            f"{total['seconds'] / count * 1000:.1f}",
        ]
        for mode, total in totals.items()
    ]
    print_table(
        f"{name}: {len(corpus):,} documents ({passages:,} passages, {indexed}), "
        f"{len(queries):,} judged queries, model {retriever.backend.model_id}, RRF k={retriever.rrf_k}, "
        f"weights vector {retriever.vector_weight} / text {retriever.text_weight}",
        ["ranking", "nDCG@10", "Recall@100", "ms/query (SQL+fusion)"],
        rows,
    )
    print(f"Relevance floor {floor}: {under_floor} of {len(queries):,} judged queries fall under it.")
    if args.fusion_study:
        fusion_study(retriever, filters, queries, qrels, url_to_doc)


def fusion_study(retriever, filters, queries: list[dict], qrels: dict, url_to_doc: dict) -> None:
    """nDCG@10 of other ways to fuse the same two candidate lists and to score a document from its passages, and
    of the vector side without HNSW's approximation.

    Fusions of a passage's two scores: weighted reciprocal rank fusion as the retriever does it, and ``alpha`` *
    vector + (1 - alpha) * text after min-max normalising each side over its candidates (a side that did not find
    the passage counts 0). A document's score: its best passage's (as the retriever does), or the sum of its best
    two or three."""
    import numpy as np

    from agent_handshake.conf import app_settings
    from agent_handshake.models import Passage

    passage_doc = {pk: url_to_doc[url] for pk, url in Passage.objects.values_list("pk", "document__url")}
    depth = max(retriever.candidates, 400)  # what search_documents(limit=100) gathers per side
    fusions = ["RRF", "min-max a=0.3", "min-max a=0.5", "min-max a=0.7"]
    aggregations = {"max": 1, "sum of top 2": 2, "sum of top 3": 3}
    totals = {(fusion, aggregation): 0.0 for fusion in fusions for aggregation in aggregations}
    # Two more rows: RRF of document ranks (on each side a document ranks where its best passage does, then
    # the two ranks are fused), and the vectors alone by an exact scan of every embedding instead of HNSW.
    document_rrf = exact_vectors = 0.0
    embeddings = dict(Passage.objects.filter(embedding__isnull=False).values_list("pk", "embedding"))
    embedding_ids = list(embeddings)
    matrix = np.array([np.asarray(embeddings[pid], dtype=np.float32) for pid in embedding_ids])
    del embeddings

    def normalised(scores: dict[int, float]) -> dict[int, float]:
        if not scores:
            return {}
        low, high = min(scores.values()), max(scores.values())
        return {pid: (value - low) / (high - low) if high > low else 1.0 for pid, value in scores.items()}

    for query in queries:
        vector = retriever.backend.embed_query(query["text"])
        nearest = dict(retriever.vector_candidates(vector, filters, depth))
        terms = retriever.query_terms(query["text"])
        text: dict[int, float] = {}
        if terms:
            chosen = retriever.matching_terms(terms, app_settings.MAX_RANKED_ROWS)
            text = dict(retriever.bm25(terms, [chosen], filters, depth))
            if len(text) < depth and len(chosen) < len(terms):
                text = dict(retriever.bm25(terms, [chosen, terms], filters, depth))
        vector_rank = {pid: rank for rank, pid in enumerate(sorted(nearest, key=lambda p: -nearest[p]), start=1)}
        text_rank = {pid: rank for rank, pid in enumerate(sorted(text, key=lambda p: -text[p]), start=1)}
        vector_norm, text_norm = normalised(nearest), normalised(text)
        judged = qrels[query["_id"]]
        document_scores: dict[str, float] = {}
        for weight, ranks in ((retriever.vector_weight, vector_rank), (retriever.text_weight, text_rank)):
            documents = dict.fromkeys(passage_doc[pid] for pid in sorted(ranks, key=ranks.get))
            for rank, doc in enumerate(documents, start=1):
                document_scores[doc] = document_scores.get(doc, 0.0) + weight / (retriever.rrf_k + rank)
        ranked = [doc for doc in sorted(document_scores, key=lambda d: -document_scores[d]) if doc != query["_id"]]
        document_rrf += ndcg_at(ranked, judged, 10)
        exact = np.argsort(-(matrix @ np.asarray(vector, dtype=np.float32)))[:depth]
        ranked = [doc for doc in dict.fromkeys(passage_doc[embedding_ids[i]] for i in exact) if doc != query["_id"]]
        exact_vectors += ndcg_at(ranked, judged, 10)
        candidates = set(nearest) | set(text)
        for fusion in fusions:
            if fusion == "RRF":
                fused = {
                    pid: (retriever.vector_weight / (retriever.rrf_k + vector_rank[pid]) if pid in vector_rank else 0)
                    + (retriever.text_weight / (retriever.rrf_k + text_rank[pid]) if pid in text_rank else 0)
                    for pid in candidates
                }
            else:
                alpha = float(fusion.split("=")[1])
                fused = {
                    pid: alpha * vector_norm.get(pid, 0.0) + (1 - alpha) * text_norm.get(pid, 0.0) for pid in candidates
                }
            by_doc: dict[str, list[float]] = {}
            for pid, value in fused.items():
                by_doc.setdefault(passage_doc[pid], []).append(value)
            for aggregation, top in aggregations.items():
                scores = {doc: sum(sorted(values, reverse=True)[:top]) for doc, values in by_doc.items()}
                ranked = [doc for doc in sorted(scores, key=lambda d: -scores[d]) if doc != query["_id"]]
                totals[(fusion, aggregation)] += ndcg_at(ranked, qrels[query["_id"]], 10)
    count = len(queries) or 1
    print_table(
        "Fusion and document aggregation (nDCG@10, the same candidates)",
        ["fusion", *aggregations],
        [
            *([fusion, *(f"{totals[(fusion, a)] / count:.3f}" for a in aggregations)] for fusion in fusions),
            ["RRF of document ranks", f"{document_rrf / count:.3f}", "", ""],
            ["vectors alone, exact scan", f"{exact_vectors / count:.3f}", "", ""],
        ],
    )


if __name__ == "__main__":
    main()
