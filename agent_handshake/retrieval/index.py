"""Building the passages of agent documents: split, embed, store with their full-text vectors.

One embedding model at a time: :class:`~agent_handshake.models.EmbeddingIndex` records which, and the HNSW
index is created for its dimension. A different configured model raises :class:`EmbeddingModelChanged` until
``manage.py agent_reindex --rebuild`` re-embeds everything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import QuerySet
from django.db.models.functions import Left

from ..conf import app_settings
from ..models import Document, EmbeddingIndex, LexemeStat, Passage, Posting
from .chunking import Chunk, split_markdown
from .embeddings import EmbeddingBackend, get_embedding_backend


class EmbeddingModelChanged(RuntimeError):
    """The configured embedding model is not the one the stored vectors were made with."""


#: The longest lexeme the statistics and postings hold (their ``lexeme`` columns). PostgreSQL's parser makes lexemes of
#: up to 2,047 characters (a long link, a token); longer ones than this are left out of BM25's statistics, so a
#: passage holding one is still indexed and found by its other words (and its embedding).
LONGEST_LEXEME = min(LexemeStat._meta.get_field("lexeme").max_length, Posting._meta.get_field("lexeme").max_length)


#: The characters of a passage's text its full-text vector is made from. A passage is at most ``PASSAGE_WORDS``
#: words, about a thousand characters, but a word may be any length (an image pasted as a data URI: megabytes of
#: base64), and PostgreSQL refuses a full-text vector over 1 MB. Measured on adversarial texts (hyphenated words,
#: links, addresses, non-Latin scripts), this many characters made vectors of under 0.3 MB.
MAX_INDEXED_CHARACTERS = 100_000


def vector_index_name(dimensions: int) -> str:
    return f"agent_passage_embedding_hnsw_{dimensions}"


def ensure_vector_index(dimensions: int) -> None:
    """The HNSW (cosine) index over ``embedding::vector(dimensions)``; queries use the same expression.

    It is partial (``vector_dims(embedding) = dimensions``), so rows of another size that a rebuild has just
    deleted, still present to the index build until vacuumed, are skipped rather than failing the cast.
    """
    with connection.cursor() as cursor:
        # Deferred foreign-key checks still pending in this transaction (after a rebuild's deletes) would make
        # PostgreSQL refuse the CREATE INDEX; run them now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {vector_index_name(dimensions)} ON {Passage._meta.db_table} "
            f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
            f"WHERE vector_dims(embedding) = {int(dimensions)}"
        )


def current_index(backend: EmbeddingBackend | None = None, *, create: bool = True) -> EmbeddingIndex | None:
    """The stored embedding index, checked against the configured backend (created on first use)."""
    backend = backend or get_embedding_backend()
    index = EmbeddingIndex.objects.order_by("pk").first()
    if index is None:
        if not create:
            return None
        with transaction.atomic():
            index = EmbeddingIndex.objects.create(model_id=backend.model_id, dimensions=backend.dimensions)
            ensure_vector_index(index.dimensions)
        return index
    if index.model_id != backend.model_id or index.dimensions != backend.dimensions:
        raise EmbeddingModelChanged(
            f"The passages hold vectors of {index.model_id} ({index.dimensions} dimensions), but EMBEDDING_BACKEND "
            f"now gives {backend.model_id} ({backend.dimensions} dimensions). Run `python manage.py agent_reindex "
            "--rebuild` to embed every passage again with the new model."
        )
    return index


def passages_mean(dimensions: int, sample: int, *, seed: str = "") -> list[float]:
    """The mean of the passages' vectors of ``dimensions`` ([] without any): of all of them when the planner's
    estimate of the table's rows is at most ``sample``, else of the rows on a random ``sample``-sized share of its
    pages (``TABLESAMPLE SYSTEM``: pages, not rows, are drawn, so the cost is the sample's, not the table's),
    drawn the same way for the same ``seed`` (``REPEATABLE``); a sample that drew no page falls back to every row."""
    table = connection.ops.quote_name(Passage._meta.db_table)
    column = connection.ops.quote_name(Passage._meta.get_field("embedding").column)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table])
        estimate = float((cursor.fetchone() or [0])[0])
        share = 100.0 * sample / estimate if estimate > sample else 100.0  # reltuples is -1 before any ANALYZE
        mean = (
            f"SELECT avg({column}::vector({int(dimensions)}))::text FROM {table} {{}} WHERE vector_dims({column}) = %s"
        )
        row = None
        if share < 100.0:
            repeatable = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:4], "big") % (2**31)
            cursor.execute(mean.format("TABLESAMPLE SYSTEM (%s) REPEATABLE (%s)"), [share, repeatable, dimensions])
            row = cursor.fetchone()
        if not (row and row[0]):
            cursor.execute(mean.format(""), [dimensions])
            row = cursor.fetchone()
    return json.loads(row[0]) if row and row[0] else []


def reset_index(backend: EmbeddingBackend | None = None) -> bool:
    """Make the next indexing run embed every document again; True when every passage was dropped for it.

    With the configured model's vectors stored, the passages stay, so searches keep answering during the rebuild:
    the documents are only marked, and the run replaces each one's passages in the transaction that writes its new
    ones. With another model's vectors, every passage, the vector index and the embedding model are dropped first:
    vectors of two models must never be compared, and the old ones answer no query of the new model anyway
    (searches fail with :class:`EmbeddingModelChanged` until the rebuild). A backend that cannot be asked raises
    :class:`EmbeddingUnavailable`, and nothing is dropped.
    """
    try:
        same_model = current_index(backend, create=False) is not None
    except EmbeddingModelChanged:
        same_model = False
    # EmbeddingUnavailable (a server that cannot be asked its model's dimensions) goes to the caller: an outage is
    # no change of model, and dropping every passage for it would leave nothing to search and nothing to embed with.
    if same_model:
        Document.objects.update(indexed_hash="")
        return False
    with transaction.atomic():
        for index in EmbeddingIndex.objects.all():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP INDEX IF EXISTS {vector_index_name(index.dimensions)}")
        EmbeddingIndex.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # TRUNCATE refuses tables with pending FK checks
            cursor.execute(f"TRUNCATE {Posting._meta.db_table}, {Passage._meta.db_table}, {LexemeStat._meta.db_table}")
        Document.objects.update(indexed_hash="")
    return True


def reset_passages(documents: QuerySet[Document], backend: EmbeddingBackend | None = None) -> None:
    """Make the next indexing run embed the passages of ``documents`` again. They stay until then, so searches keep
    answering: the run replaces each document's passages in the transaction that writes its new ones.

    Refused with :class:`EmbeddingModelChanged` when the configured model is not the stored one: the other
    documents' vectors would then be of another model, so only :func:`reset_index` (everything) will do.
    """
    current_index(backend, create=False)
    documents.update(indexed_hash="")


def _counted_lexemes(passages: QuerySet[Passage]) -> tuple[str, list]:
    """SQL of ``passages``' lexemes, each with the number of those passages holding it (``lexeme``, ``n``)."""
    query, params = passages.values("search_vector").query.sql_with_params()
    return (
        f"SELECT lexeme, count(*) AS n FROM ({query}) AS p, unnest(tsvector_to_array(p.search_vector)) AS lexeme "
        "WHERE p.search_vector IS NOT NULL AND length(lexeme) <= %s GROUP BY lexeme",
        [*params, LONGEST_LEXEME],
    )


def _add_lexemes(passages: QuerySet[Passage]) -> None:
    """Count the lexemes of ``passages`` into the document frequencies."""
    counted, params = _counted_lexemes(passages)
    stats = LexemeStat._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            # In lexeme order, so that runs for different documents lock shared lexemes in one order (no deadlock).
            f"INSERT INTO {stats} (lexeme, passages) SELECT lexeme, n FROM ({counted}) AS c ORDER BY lexeme "
            f"ON CONFLICT (lexeme) DO UPDATE SET passages = {stats}.passages + EXCLUDED.passages",
            params,
        )


def _remove_lexemes(passages: QuerySet[Passage]) -> None:
    """Take the lexemes of ``passages`` out of the document frequencies.

    Only the rows the statistics hold change (they may lack a lexeme until ``agent_reindex`` rebuilds them: a
    count of its own for it would be wrong), and a lexeme no passage holds any more leaves them, as a rebuild
    leaves it out. The rows are locked first in lexeme order, as :func:`_add_lexemes` takes them.
    """
    counted, params = _counted_lexemes(passages)
    stats = LexemeStat._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH removed AS ({counted}), "
            f"locked AS (SELECT s.lexeme, s.passages - r.n AS remaining FROM {stats} AS s "
            "JOIN removed AS r ON r.lexeme = s.lexeme ORDER BY s.lexeme FOR UPDATE OF s), "
            f"emptied AS (DELETE FROM {stats} WHERE lexeme IN (SELECT lexeme FROM locked WHERE remaining <= 0)) "
            f"UPDATE {stats} SET passages = locked.remaining FROM locked "
            f"WHERE {stats}.lexeme = locked.lexeme AND locked.remaining > 0",
            params,
        )


def write_postings(passages: QuerySet[Passage]) -> None:
    """The BM25 statistics of ``passages`` (their full-text vectors written): each passage's length, and per
    lexeme a posting with its occurrences by field (weights A, B, C: title, heading, text)."""
    ids = list(passages.values_list("pk", flat=True))
    table = Passage._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET length = (SELECT coalesce(sum(array_length(x.positions, 1)), 0) "
            "FROM unnest(search_vector) AS x) WHERE id = ANY(%s) AND search_vector IS NOT NULL",
            [ids],
        )
        cursor.execute(
            f"INSERT INTO {Posting._meta.db_table} (passage_id, lexeme, in_title, in_heading, in_text, length) "
            "SELECT p.id, u.lexeme, "
            "(SELECT count(*) FROM unnest(u.weights) AS w WHERE w = 'A'), "
            "(SELECT count(*) FROM unnest(u.weights) AS w WHERE w = 'B'), "
            "(SELECT count(*) FROM unnest(u.weights) AS w WHERE w NOT IN ('A', 'B')), p.length "
            f"FROM {table} AS p, unnest(p.search_vector) AS u WHERE p.id = ANY(%s) AND p.search_vector IS NOT NULL "
            "AND length(u.lexeme) <= %s",
            [ids, LONGEST_LEXEME],
        )


def lock_documents(documents: QuerySet[Document]) -> dict[int, tuple[str, str]]:
    """Lock the rows of ``documents`` until the transaction ends; their current ``(content_hash, indexed_hash)``.

    Every write of a document's passages holds this lock, so two runs for one document (two saves' tasks, a
    redelivered message, ``agent_reindex`` beside a worker) take turns: the second sees what the first wrote,
    never counts the same passages' lexemes twice, and never inserts the same positions twice. Rows are locked in
    primary-key order, so runs over overlapping batches cannot deadlock.
    """
    rows = documents.select_for_update().order_by("pk").values_list("pk", "content_hash", "indexed_hash")
    return {pk: (content_hash, indexed_hash) for pk, content_hash, indexed_hash in rows}


def delete_passages(documents: QuerySet[Document]) -> None:
    """Delete the passages of ``documents`` (locked first), taking their lexemes out of the document frequencies."""
    with transaction.atomic():
        locked = list(lock_documents(documents))
        if not locked:  # gone already (another run deleted them)
            return
        passages = Passage.objects.filter(document__in=locked)
        _remove_lexemes(passages)
        passages.delete()


def refresh_lexeme_stats() -> int:
    """Rebuild every document frequency from the passages (corrects any drift). Returns the lexeme count."""
    stats = LexemeStat._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {stats}")
        cursor.execute(
            f"INSERT INTO {stats} (lexeme, passages) SELECT word, ndoc FROM ts_stat("
            f"'SELECT search_vector FROM {Passage._meta.db_table} WHERE search_vector IS NOT NULL') "
            "WHERE length(word) <= %s",
            [LONGEST_LEXEME],
        )
        return cursor.rowcount


def _embedding_text(document: Document, heading: str, text: str) -> str:
    # The title and section heading give a passage the context its own sentences often lack.
    return "\n".join(part for part in (document.title, heading, text) if part)


def _document_markdown(document: Document) -> str:
    return f"{document.summary}\n\n{document.markdown}" if document.summary else document.markdown


def index_documents(
    documents: Iterable[Document],
    *,
    backend: EmbeddingBackend | None = None,
    batch_size: int = 128,
    progress: Callable[[int], None] | None = None,
) -> int:
    """(Re)build the passages of documents whose content changed since they were last indexed.

    Passages of several documents are embedded together, ``batch_size`` passages at a time. Returns the number
    of documents indexed; unchanged ones are skipped.
    """
    backend = backend or get_embedding_backend()
    current_index(backend)
    pending: list[tuple[Document, list[Chunk]]] = []
    pending_passages = 0
    indexed = 0
    for document in documents:
        if document.indexed_hash == document.content_hash:
            if progress:
                progress(1)
            continue
        passages = split_markdown(
            _document_markdown(document),
            max_words=app_settings.PASSAGE_WORDS,
            overlap_words=app_settings.PASSAGE_OVERLAP,
        ) or [Chunk(0, "", document.title)]  # a document with no text is still found by its title
        pending.append((document, passages))
        pending_passages += len(passages)
        if pending_passages >= batch_size:
            indexed += _store(pending, backend)
            if progress:
                progress(len(pending))
            pending, pending_passages = [], 0
    if pending:
        indexed += _store(pending, backend)
        if progress:
            progress(len(pending))
    return indexed


def _store(batch: Sequence[tuple[Document, list[Chunk]]], backend: EmbeddingBackend) -> int:
    # Embedding is the slow part: do it before taking any lock.
    vectors = iter(backend.embed([_embedding_text(document, p.heading, p.text) for document, ps in batch for p in ps]))
    embedded = [(document, passages, [next(vectors) for _ in passages]) for document, passages in batch]
    config = app_settings.SEARCH_CONFIG
    with transaction.atomic():
        current = lock_documents(Document.objects.filter(pk__in=[document.pk for document, _ in batch]))
        # Write only what is still wanted once the lock is held: not a document another run has indexed meanwhile
        # (same hash), nor one whose content changed again or was deleted (the run queued by that change does it).
        embedded = [
            (document, passages, rows)
            for document, passages, rows in embedded
            if current.get(document.pk, ("", ""))[0] == document.content_hash != current[document.pk][1]
        ]
        documents = [document for document, _, _ in embedded]
        if not documents:
            return 0
        delete_passages(Document.objects.filter(pk__in=[document.pk for document in documents]))
        for document, passages, rows in embedded:
            Passage.objects.bulk_create(
                Passage(
                    document=document,
                    position=p.position,
                    heading=p.heading[:500],
                    text=p.text,
                    title=document.title,
                    model_label=f"{document.content_type.app_label}.{document.content_type.model}",
                    ahp_content_type=document.ahp_content_type,
                    published_at=document.published_at,
                    embedding=vector.tolist(),
                )
                for p, vector in zip(passages, rows, strict=True)
            )
            Document.objects.filter(pk=document.pk).update(indexed_hash=document.content_hash)
        written = Passage.objects.filter(document__in=documents)
        written.update(
            search_vector=SearchVector("title", weight="A", config=config)
            + SearchVector("heading", weight="B", config=config)
            + SearchVector(Left("text", MAX_INDEXED_CHARACTERS), weight="C", config=config)
        )
        _add_lexemes(written)
        write_postings(written)
    return len(documents)


def index_document(document: Document, backend: EmbeddingBackend | None = None) -> bool:
    """Index one document if its content changed; True if it was (re)indexed."""
    return index_documents([document], backend=backend) == 1
