"""A site large enough for the HNSW plan, for the tests of what a filtered vector read returns on it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from django.db import connection

from agent_handshake.models import Document, Passage

#: Passages, and the vectors after theirs (not passages': the tests' queries).
PASSAGES, QUERIES = 3000, 20


def random_passages(documents: Sequence[Document]) -> np.ndarray:
    """Replace every passage by 3,000 of random unit vectors (a fixed seed), ten in a row for each of ``documents``
    in turn, one in ten of the registered ``testapp.article`` and the rest of a model no longer registered (left
    out by the filter every vector read has then); and make this transaction read them as a large site does: the
    HNSW index built afresh (not worn by the suite's earlier deletes, whose dead entries use up an iterative scan's
    candidates), the planner told, sequential scans off (all rolled back after the test). Returns the vectors: the
    passages' first, then ``QUERIES`` more."""
    vectors = np.random.default_rng(11).standard_normal((PASSAGES + QUERIES, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    Passage.objects.all().delete()
    Passage.objects.bulk_create(
        Passage(
            document=documents[n // 10 % len(documents)],
            position=n,
            text=f"Passage {n}.",
            title="Kettle",
            model_label="testapp.article" if n % 10 == 0 else "gone.model",
            ahp_content_type="article",
            embedding=vectors[n],
        )
        for n in range(PASSAGES)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"REINDEX TABLE {Passage._meta.db_table}")
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")
        cursor.execute("SET enable_seqscan = off")
    return vectors
