"""Hybrid retrieval: pgvector nearest neighbours and PostgreSQL full text, fused, grouped into documents.

Both candidate lists come from one table (``Passage``) with the request's filters applied in SQL; the fusion is
reciprocal rank fusion (RRF), weighted per list. The benchmark in ``bench/bench_retrieval_quality.py`` measures
each list alone and fused, through this class.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import QuerySet

from .. import state
from ..conf import app_settings
from ..models import LexemeStat, Passage, Posting
from ..registry import content_registry
from .embeddings import EmbeddingBackend, get_embedding_backend
from .index import current_index

MODES = ("hybrid", "vector", "text")


@dataclass(frozen=True)
class Filters:
    """Restrictions a request may put on retrieval: registered model labels, AHP content types, dates, and the
    documents a front door already narrowed the search to (``documents``: None is all of them, an empty list
    none; NLWeb's price constraint is one). ``documents`` may be a query of document ids (``values_list("pk",
    flat=True)``), applied as a subquery: a list of every priced product of a large shop would be read into
    Python and sent back as one parameter."""

    models: Sequence[str] = ()
    content_types: Sequence[str] = ()
    published_after: datetime.datetime | None = None
    published_before: datetime.datetime | None = None
    documents: Sequence[int] | QuerySet | None = None

    @property
    def by_query(self) -> bool:
        """Whether ``documents`` is a query: what it selects follows the site's data (a price), which no cache key
        names, and reading its ids to name them would cost what the subquery saves."""
        return isinstance(self.documents, QuerySet)

    def sql(self) -> tuple[str, list]:
        clauses, params = [], []
        # No models named: the registered ones, when the index also holds another's (see :func:`unserved_labels`).
        # (None: no clause; an empty list, when no model is registered any more, leaves every passage out.)
        models = list(self.models) or ([config.label for config in content_registry] if unserved_labels() else None)
        if models is not None:
            clauses.append("model_label = ANY(%s)")
            params.append(models)
        if self.content_types:
            clauses.append("ahp_content_type = ANY(%s)")
            params.append(list(self.content_types))
        if self.published_after:
            clauses.append("published_at >= %s")
            params.append(self.published_after)
        if self.published_before:
            clauses.append("published_at <= %s")
            params.append(self.published_before)
        if isinstance(self.documents, QuerySet):
            documents = self.documents.order_by()  # (an order means nothing to IN)
            subquery, subquery_params = documents.query.get_compiler(using=documents.db).as_sql()
            clauses.append(f"document_id IN ({subquery})")
            params.extend(subquery_params)
        elif self.documents is not None:
            clauses.append("document_id = ANY(%s)")
            params.append(list(self.documents))
        return "".join(f" AND {clause}" for clause in clauses), params

    def __bool__(self) -> bool:
        return bool(
            self.models
            or self.content_types
            or self.published_after
            or self.published_before
            or self.documents is not None
        )


def unserved_labels() -> list[str]:
    """The labels of models whose passages the index holds though they are no longer registered: they stay until
    ``agent_reindex`` removes them (:func:`agent_handshake.indexing.remove_unregistered`), and nothing may serve them.
    Usually none, and then a search needs no clause for it (measured in bench/bench_converse.py at 100,000
    passages, in two runs: the retrieval SQL 34.9 ms p50 with the clause always on, 27.9 ms with it only when
    needed): the labels present are read once per content state."""

    def present() -> bytes:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT DISTINCT model_label FROM {Passage._meta.db_table}")
            return json.dumps(sorted(row[0] for row in cursor.fetchall())).encode()

    labels = json.loads(state.cached_body(f"agent_handshake:passage-labels:{state.snapshot().token}", present))
    registered = {config.label for config in content_registry}
    return [label for label in labels if label not in registered]


@dataclass(frozen=True)
class QueryTerm:
    """A full-text query word: its lexeme, the number of passages holding it, and its IDF weight."""

    lexeme: str
    passages: int
    idf: float


@dataclass
class PassageHit:
    passage: Passage
    score: float
    vector_rank: int | None = None
    text_rank: int | None = None
    #: Cosine similarity of the passage's embedding to the query's (None: not among the vector candidates).
    similarity: float | None = None


@dataclass
class DocumentHit:
    """A document with the passages of it that matched, best first; ``score`` is its best passage's."""

    document_id: int
    title: str
    url: str
    model_label: str
    ahp_content_type: str
    score: float
    passages: list[PassageHit] = field(default_factory=list)

    @property
    def similarity(self) -> float | None:
        """The best cosine similarity of its passages to the query (None: none was a vector candidate)."""
        return max((p.similarity for p in self.passages if p.similarity is not None), default=None)


class HybridRetriever:
    def __init__(
        self,
        backend: EmbeddingBackend | None = None,
        *,
        candidates: int | None = None,
        rrf_k: int | None = None,
        vector_weight: float | None = None,
        text_weight: float | None = None,
    ) -> None:
        self.backend = backend or get_embedding_backend()
        self.candidates = candidates or app_settings.RETRIEVAL_CANDIDATES
        self.rrf_k = rrf_k or app_settings.RRF_K
        self.vector_weight = app_settings.VECTOR_WEIGHT if vector_weight is None else vector_weight
        self.text_weight = app_settings.TEXT_WEIGHT if text_weight is None else text_weight

    @property
    def relevance_floor(self) -> float:
        """``RELEVANCE_FLOOR``, or the embedding model's measured floor when that is None (0: no floor)."""
        floor = app_settings.RELEVANCE_FLOOR
        return float(self.backend.relevance_floor or 0.0) if floor is None else float(floor)

    # Candidate lists

    def vector_candidates(
        self, query_vector: np.ndarray, filters: Filters, limit: int, *, read: str = "auto"
    ) -> list[tuple[int, float]]:
        """The nearest passages as (passage id, cosine similarity to the query), nearest first.

        ``read``: ``"auto"`` walks the HNSW graph, and reads exactly when the walk comes back short of ``limit``;
        ``"graph"`` and ``"exact"`` do one or the other alone (bench/bench_converse.py times each)."""
        if read not in ("auto", "graph", "exact"):
            raise ValueError('read must be "auto", "graph" or "exact"')
        index = current_index(self.backend, create=False)
        if index is None:
            return []
        dims = int(index.dimensions)
        where, params = filters.sql()
        table = Passage._meta.db_table
        literal = "[" + ",".join(f"{x:.7g}" for x in query_vector.tolist()) + "]"
        distance = f"embedding::vector({dims}) <=> %s::vector({dims})"
        rows: list[tuple[int, float]] = []
        with transaction.atomic(), connection.cursor() as cursor:
            if read != "exact":
                cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(limit, app_settings.HNSW_EF_SEARCH)])
                if where:
                    # pgvector 0.8: keep scanning the graph until enough rows pass the filters (the request's, or
                    # the clause that leaves out the passages of models no longer registered).
                    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                cursor.execute(
                    # The literal dimension lets the planner match the partial HNSW index (see index.py). A relaxed
                    # scan returns the rows of its later passes over the graph after those of the first, nearer or
                    # not: they are sorted again, as pgvector's README does (a materialized CTE keeps the index
                    # plan; "+ 0" keeps PostgreSQL 17+ from trusting the CTE's order and skipping the sort).
                    f"WITH nearest AS MATERIALIZED (SELECT id, {distance} AS distance FROM {table} "
                    f"WHERE vector_dims(embedding) = {dims}{where} ORDER BY {distance} LIMIT %s) "
                    "SELECT id, distance FROM nearest ORDER BY distance + 0, id",
                    [literal, *params, literal, limit],
                )
                rows = cursor.fetchall()
            if read == "exact" or (read == "auto" and len(rows) < limit):
                # Short of the limit: either there are fewer rows than that (read them all, cheaply), or the walk
                # gave up before it found them: an iterative scan at hnsw.max_scan_tuples (a few pages of a large
                # site, site_info's), or any walk whose ef_search candidates were mostly dead entries that vacuum
                # has not cleared yet (after a reindex or edits: an unfiltered read then came back with none).
                # Read exactly: the rows that pass the filters (through their indexes), each compared ("+ 0": not in
                # the HNSW index's order).
                cursor.execute(
                    f"SELECT id, {distance} FROM {table} WHERE vector_dims(embedding) = {dims}{where} "
                    f"ORDER BY ({distance}) + 0, id LIMIT %s",
                    [literal, *params, literal, limit],
                )
                rows = cursor.fetchall()
        return [(row[0], 1.0 - row[1]) for row in rows]

    def query_terms(self, query: str) -> list[QueryTerm]:
        """The query's lexemes with their document frequencies and IDF weights (BM25's), rarest first; very
        common ones left out."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT q.lexeme, coalesce(s.passages, 0) "
                "FROM unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s))) AS q(lexeme) "
                f"LEFT JOIN {LexemeStat._meta.db_table} s ON s.lexeme = q.lexeme",
                [app_settings.SEARCH_CONFIG, query],
            )
            frequencies = [(lexeme, count) for lexeme, count in cursor.fetchall() if count > 0]
            if not frequencies:
                return []
        total = max(self.collection()[0], max(count for _, count in frequencies))
        weighted = sorted(
            (QueryTerm(word, n, math.log(1 + (total - n + 0.5) / (n + 0.5))) for word, n in frequencies),
            key=lambda term: (-term.idf, term.lexeme),
        )
        # Words in more than MAX_TERM_SHARE of the passages barely tell them apart and make the OR match (and
        # its ranking) touch most of the table; keep at least the two rarest words.
        common = math.log(1 + (1 - app_settings.MAX_TERM_SHARE) / app_settings.MAX_TERM_SHARE)
        kept = [term for term in weighted if term.idf >= common] or weighted[:2]
        return kept[: app_settings.MAX_QUERY_TERMS]

    @staticmethod
    def matching_terms(terms: list[QueryTerm], budget: int) -> list[QueryTerm]:
        """The rarest words whose passages add up to at most ``budget`` (always at least the rarest word).

        These decide which passages are ranked at all. A passage holding none of them shares only commoner
        words with the query, each worth less than any of these, so it rarely reaches the top; on a large site
        this keeps the ranked set small and made of the likeliest passages (README, ``MAX_RANKED_ROWS``)."""
        chosen: list[QueryTerm] = []
        rows = 0
        for term in terms:
            if chosen and rows + term.passages > budget:
                break
            chosen.append(term)
            rows += term.passages
        return chosen

    def text_candidates(self, query: str, filters: Filters, limit: int) -> list[int]:
        """Passages matching the query's rarest words, ranked like BM25: each query word's ts_rank (term
        frequency, title > heading > text) weighted by its IDF. PostgreSQL's ts_rank alone has no IDF, so a
        common word would count as much as a rare one; the weights come from LexemeStat.

        The passage counts are the whole site's, so within the request's filters (or when the rarest words are
        in few passages) the rarest words may match fewer than ``limit`` passages; then the passages of every
        query word are ranked too, again at most MAX_RANKED_ROWS of them."""
        terms = self.query_terms(query)
        if not terms:
            return []
        budget = app_settings.MAX_RANKED_ROWS
        chosen = self.matching_terms(terms, budget)
        ids = self._rank_matches(terms, [chosen], filters, limit)
        if len(ids) < limit and len(chosen) < len(terms):
            ids = self._rank_matches(terms, [chosen, terms], filters, limit)
        return ids

    def _rank_matches(
        self, terms: list[QueryTerm], matches: list[list[QueryTerm]], filters: Filters, limit: int
    ) -> list[int]:
        return [passage_id for passage_id, _ in self.bm25(terms, matches, filters, limit)]

    def bm25(
        self, terms: list[QueryTerm], matches: list[list[QueryTerm]], filters: Filters, limit: int
    ) -> list[tuple[int, float]]:
        """The best ``limit`` passages holding any word of one of the ``matches`` lists (at most MAX_RANKED_ROWS
        per list: a hard bound on the work), scored by BM25 on every word of ``terms``:

            sum over the query's words of  idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length))

        with ``tf`` the word's occurrences in the passage, those in its title and heading weighted by
        ``BM25_FIELD_WEIGHTS``, from the postings (:class:`~agent_handshake.models.Posting`)."""
        where, params = filters.sql()
        table = Passage._meta.db_table
        budget = app_settings.MAX_RANKED_ROWS

        def tsquery(term: QueryTerm) -> str:
            return "'" + term.lexeme.replace("\\", "\\\\").replace("'", "''") + "'"

        candidate_params = [
            value for words in matches for value in (" | ".join(tsquery(term) for term in words), *params, budget)
        ]
        if len(matches) == 1:
            matched = f"SELECT id FROM {table} WHERE search_vector @@ %s::tsquery{where} LIMIT %s"
        else:
            matched = " UNION ".join(
                f"(SELECT id FROM {table} WHERE search_vector @@ %s::tsquery{where} LIMIT %s)" for _ in matches
            )
        weights = {"title": 1.0, "heading": 1.0, "text": 1.0, **app_settings.BM25_FIELD_WEIGHTS}
        k1, b = float(app_settings.BM25_K1), float(app_settings.BM25_B)
        tf = "(%s * p.in_title + %s * p.in_heading + %s * p.in_text)"
        score = f"sum(q.idf * {tf} * %s / ({tf} + %s * (1 - %s + %s * p.length / %s)))"
        field_weights = [float(weights["title"]), float(weights["heading"]), float(weights["text"])]
        score_params = [*field_weights, k1 + 1, *field_weights, k1, b, b, self.average_length()]
        with connection.cursor() as cursor:
            cursor.execute(
                # Each query word's postings, read from the (lexeme, passage) index with their counts, joined to
                # the candidate passages: a word's postings are contiguous, where probing every candidate for
                # every word is a random lookup each (100,000 passages: 235 -> 21 ms p50).
                f"SELECT p.passage_id, {score} FROM {Posting._meta.db_table} AS p "
                "JOIN unnest(%s::text[], %s::float8[]) AS q(lexeme, idf) ON q.lexeme = p.lexeme "
                f"WHERE p.passage_id IN ({matched}) "
                "GROUP BY p.passage_id ORDER BY 2 DESC, p.passage_id LIMIT %s",
                [*score_params, [t.lexeme for t in terms], [t.idf for t in terms], *candidate_params, limit],
            )
            return [(row[0], float(row[1])) for row in cursor.fetchall()]

    def average_length(self) -> float:
        return self.collection()[1]

    @staticmethod
    def collection() -> tuple[int, float]:
        """The number of passages (BM25's N) and their average length (``avgdl``), counted once per content state
        and process: exact, so a ranking does not move with the planner's row estimate."""

        def compute() -> bytes:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT count(*), coalesce(avg(length), 1) FROM {Passage._meta.db_table} "
                    "WHERE search_vector IS NOT NULL"
                )
                count, average = cursor.fetchone()
                # Passages of stop words alone have length 0: the average must not be (it divides).
                return json.dumps([max(int(count), 1), float(average) or 1.0]).encode()

        count, average = json.loads(state.cached_body(f"agent_handshake:bm25:{state.snapshot().token}", compute))
        return int(count), float(average)

    def holds_every_word(self, query: str, passage_ids: Sequence[int]) -> bool:
        """Whether one of these passages holds every word of ``query`` (PostgreSQL's ``plainto_tsquery``: all of
        its lexemes, stop words left out), in the full-text configuration the passages are indexed with."""
        if not passage_ids:
            return False
        words = SearchQuery(query, config=app_settings.SEARCH_CONFIG, search_type="plain")
        return Passage.objects.filter(pk__in=passage_ids, search_vector=words).exists()

    # Fusion

    def fuse(self, vector_ids: list[int], text_ids: list[int]) -> list[tuple[int, float, int | None, int | None]]:
        """(passage id, RRF score, rank in the vector list, rank in the text list), best first."""
        scores: dict[int, float] = {}
        ranks: dict[int, list[int | None]] = {}
        for weight, ids, slot in ((self.vector_weight, vector_ids, 0), (self.text_weight, text_ids, 1)):
            for rank, passage_id in enumerate(ids, start=1):
                scores[passage_id] = scores.get(passage_id, 0.0) + weight / (self.rrf_k + rank)
                ranks.setdefault(passage_id, [None, None])[slot] = rank
        ordered = sorted(scores, key=lambda pid: (-scores[pid], pid))
        return [(pid, scores[pid], ranks[pid][0], ranks[pid][1]) for pid in ordered]

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        mode: str = "hybrid",
        query_vector: np.ndarray | None = None,
    ) -> list[PassageHit]:
        """The best ``limit`` passages for ``query``."""
        fused, similarities = self.ranked(query, limit=limit, filters=filters, mode=mode, query_vector=query_vector)
        return self.hits(fused[:limit], similarities)

    def ranked(
        self,
        query: str,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        mode: str = "hybrid",
        query_vector: np.ndarray | None = None,
    ) -> tuple[list[tuple[int, float, int | None, int | None]], dict[int, float]]:
        """The whole fused candidate pool (:meth:`fuse`; ``max(RETRIEVAL_CANDIDATES, limit)`` from each side), best
        first, and each vector candidate's cosine similarity: ids and scores, no passage loaded."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        filters = filters or Filters()
        if isinstance(filters.documents, (list, tuple)) and not filters.documents:
            return [], {}  # no document can pass: no embedding, no scan of an index for rows none of which would
        depth = max(self.candidates, limit)
        nearest: list[tuple[int, float]] = []
        text_ids: list[int] = []
        if mode in ("hybrid", "vector"):
            if query_vector is None:
                query_vector = self.backend.embed_query(query)
            nearest = self.vector_candidates(query_vector, filters, depth)
        if mode in ("hybrid", "text"):
            text_ids = self.text_candidates(query, filters, depth)
        return self.fuse([pid for pid, _ in nearest], text_ids), dict(nearest)

    @staticmethod
    def hits(
        fused: Sequence[tuple[int, float, int | None, int | None]], similarities: Mapping[int, float]
    ) -> list[PassageHit]:
        """``fused``'s passages loaded with their documents, in its order (one query)."""
        passages = Passage.objects.select_related("document").defer("embedding", "search_vector", "document__markdown")
        by_id = passages.in_bulk([pid for pid, *_ in fused])
        return [
            PassageHit(by_id[pid], score, vector_rank, text_rank, similarities.get(pid))
            for pid, score, vector_rank, text_rank in fused
            if pid in by_id
        ]

    def search_documents(
        self, query: str, *, limit: int = 10, filters: Filters | None = None, mode: str = "hybrid", **kwargs
    ) -> list[DocumentHit]:
        """The best ``limit`` documents, each with its matching passages (passages grouped by document, a document
        ranked by its best passage).

        The documents come from the best ``limit * 4`` fused passages, each with its passages among them. When
        those hold fewer than ``limit`` documents (a long page whose many passages all match fills them), the rest
        of the candidate pool, already ranked, adds the next documents with their passages in it: one query for
        their document ids and one for their passages, no further scan. Fewer than ``limit`` come back only when
        the pool itself holds fewer documents."""
        head_size = limit * 4
        fused, similarities = self.ranked(query, limit=head_size, filters=filters, mode=mode, **kwargs)
        documents: dict[int, DocumentHit] = {}
        self._group(self.hits(fused[:head_size], similarities), documents)
        tail = fused[head_size:]
        if len(documents) < limit and tail:
            owner = dict(Passage.objects.filter(pk__in=[pid for pid, *_ in tail]).values_list("pk", "document_id"))
            added: set[int] = set()
            wanted = []
            for entry in tail:
                document_id = owner.get(entry[0])
                if document_id is None or document_id in documents:
                    continue  # gone since it was ranked, or a document the head found keeps the passages it had
                if document_id not in added:
                    if len(documents) + len(added) >= limit:
                        continue
                    added.add(document_id)
                wanted.append(entry)
            self._group(self.hits(wanted, similarities), documents)
        return list(documents.values())[:limit]

    @staticmethod
    def _group(hits: Sequence[PassageHit], documents: dict[int, DocumentHit]) -> None:
        """Add ``hits`` (best first) to ``documents``: a document's entry at its first, its score that passage's."""
        for hit in hits:
            document = hit.passage.document
            entry = documents.get(document.pk)
            if entry is None:
                entry = documents[document.pk] = DocumentHit(
                    document_id=document.pk,
                    title=document.title,
                    url=document.url,
                    model_label=hit.passage.model_label,
                    ahp_content_type=document.ahp_content_type,
                    score=hit.score,
                )
            entry.passages.append(hit)
