"""Content gaps: the questions agents asked that the site could not answer, grouped by meaning.

A recorded request (:class:`~agent_handshake.models.AgentRequest`) is a gap candidate when it got no answer, or an
answer from weak matches only, and its question was recorded (``INSIGHTS_RECORD_QUESTIONS``). :func:`update_gaps`
(the ``update_content_gaps`` beat task) takes the candidates no run has taken yet, oldest first, at most
``INSIGHTS_GAP_BATCH``, and embeds them with the site's embedding model. Each joins the existing gap whose centre it
is closest to if the similarity reaches ``INSIGHTS_GAP_SIMILARITY``; the others are clustered
(:func:`agent_handshake.retrieval.clustering.cluster`) into new gaps, and a question like no other is a gap of one.

Similarities are measured with the site's common direction taken out (the mean of its passages' embeddings): the
questions a site gets share its topic ("tea"), and with small models that shared word outweighs what is asked
("gift cards" or "shipping"). A gap's stored centre is the plain running mean of its questions' embeddings, so the
lens follows the content as it changes.

A question that joins an *answered* gap reopens it (what was written did not answer it); a *dismissed* gap takes
its questions silently and stays dismissed. After each run the touched gaps get their nearest page again: the
document of the passage most similar to the gap's centre, with that similarity, for an editor to extend or link.

Two runs never overlap: a run holds a transaction-level advisory lock, and a run that finds it taken returns at
once (the questions wait for the next run), so no question is counted twice and no theme gets two gaps from two
runs at once. Centres belong to one embedding model (``ContentGap.model_id``); after the site changes models, a
run first computes the centres of up to ``INSIGHTS_GAP_BATCH`` gaps again from their label and examples (largest
gaps first), and a gap not yet re-centred takes no questions meanwhile.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from django.db import connection, transaction
from django.db.models import Avg, Func, IntegerField, Q, QuerySet
from django.utils import timezone
from pgvector.django import VectorField

from ..conf import app_settings
from ..models import AgentRequest, ContentGap, EmbeddingIndex, Outcome, Passage
from ..retrieval.clustering import cluster, unit
from ..retrieval.embeddings import EmbeddingBackend, get_embedding_backend
from ..retrieval.hybrid import Filters, HybridRetriever
from ..retrieval.index import EmbeddingModelChanged, current_index

#: How many questions a gap keeps as examples for editors (the most recent distinct ones).
EXAMPLES = 5
LOCK = "agent_handshake.insights.gaps"


def waiting() -> QuerySet[AgentRequest]:
    """The requests whose questions no run has grouped yet: no answer or weak matches, with a question."""
    unanswered = Q(outcome=Outcome.NO_ANSWER) | Q(weak=True)
    return AgentRequest.objects.filter(unanswered, clustered_at=None).exclude(question="")


@dataclass
class Joined:
    """What one run adds to one gap."""

    gap: ContentGap
    members: list[int] = field(default_factory=list)


def update_gaps(now: datetime.datetime | None = None) -> int:
    """Group the waiting questions into content gaps (see the module docstring); how many it grouped (0 when
    another run holds the lock)."""
    now = now or timezone.now()
    backend = get_embedding_backend()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", [LOCK])
            if not cursor.fetchone()[0]:
                return 0
        index = passage_index(backend)
        recentred = recentre(backend)
        rows = list(waiting().order_by("at", "pk").only("pk", "at", "question")[: app_settings.INSIGHTS_GAP_BATCH])
        if rows:
            vectors = backend.embed([row.question for row in rows]).astype(np.float64)
            groups = group(rows, vectors, site_direction(index), backend.model_id)
            for joined in groups:
                merge(joined, rows, vectors, backend)
            save(groups, rows, now)
            touched = [joined.gap for joined in groups]
        else:
            touched = []
        if index is not None:
            refresh_nearest([*recentred, *touched], backend)
    return len(rows)


def passage_index(backend: EmbeddingBackend) -> EmbeddingIndex | None:
    """The passages' embedding index if its vectors are the configured model's (else no nearest page can be
    measured until ``agent_reindex --rebuild``)."""
    try:
        return current_index(backend, create=False)
    except EmbeddingModelChanged:
        return None


def site_direction(index: EmbeddingIndex | None) -> np.ndarray | None:
    """The unit mean of the passages' embeddings (pgvector's ``avg``); None without passages of this model."""
    if index is None:
        return None
    mean = (
        Passage.objects.alias(dims=Func("embedding", function="vector_dims", output_field=IntegerField()))
        .filter(dims=index.dimensions)
        .aggregate(mean=Avg("embedding", output_field=VectorField()))["mean"]
    )
    if mean is None:
        return None
    direction = unit(np.asarray(mean, dtype=np.float64))
    return direction if np.any(direction) else None


def lens(vectors: np.ndarray, direction: np.ndarray | None) -> np.ndarray:
    """``vectors`` (unit rows) with the site's common ``direction`` projected out, unit length again."""
    if direction is None or len(vectors) == 0:
        return vectors
    rest = vectors - np.outer(vectors @ direction, direction)
    return rest / np.maximum(np.linalg.norm(rest, axis=1, keepdims=True), 1e-12)


def group(
    rows: Sequence[AgentRequest], vectors: np.ndarray, direction: np.ndarray | None, model_id: str
) -> list[Joined]:
    """Each row into an existing gap it is close enough to, or into a new (unsaved) gap of its cluster; similarities
    are measured through :func:`lens`."""
    threshold = app_settings.INSIGHTS_GAP_SIMILARITY
    seen = lens(vectors, direction)
    gaps = list(ContentGap.objects.filter(model_id=model_id).exclude(centroid=None))
    joined: dict[int, Joined] = {}
    rest = list(range(len(rows)))
    if gaps:
        centres = np.stack([np.asarray(gap.centroid, dtype=np.float64) for gap in gaps])
        similarities = seen @ lens(centres, direction).T
        nearest = np.argmax(similarities, axis=1)
        rest = []
        for position in range(len(rows)):
            best = int(nearest[position])
            if similarities[position, best] >= threshold:
                joined.setdefault(best, Joined(gaps[best])).members.append(position)
            else:
                rest.append(position)
    groups = list(joined.values())
    if rest:
        clusters = cluster(seen[rest], threshold)
        placed = {member for found in clusters for member in found.members}
        members = [[rest[i] for i in found.members] for found in clusters]
        members += [[rest[i]] for i in range(len(rest)) if i not in placed]  # like no other: a gap of one
        for positions in members:
            groups.append(Joined(ContentGap(model_id=model_id, count=0, examples=[]), positions))
    return groups


def merge(joined: Joined, rows: Sequence[AgentRequest], vectors: np.ndarray, backend: EmbeddingBackend) -> None:
    """Add the run's questions to the gap: count, centre (running mean), first and last asked, examples, label."""
    gap, members = joined.gap, joined.members
    added = vectors[members].sum(axis=0)
    if gap.pk is not None and gap.centroid is not None:
        added = added + np.asarray(gap.centroid, dtype=np.float64) * gap.count
    gap.centroid = unit(added)
    gap.count += len(members)
    moments = [rows[i].at for i in members]
    gap.first_seen = min([*moments, *([gap.first_seen] if gap.first_seen else [])])
    gap.last_seen = max([*moments, *([gap.last_seen] if gap.last_seen else [])])
    questions = [rows[i].question for i in sorted(members, key=lambda i: (rows[i].at, rows[i].pk))]
    gap.examples = recent_distinct([*gap.examples, *questions])
    # The label: the question nearest the centre, among the old label, the examples and the new questions.
    known = [text for text in dict.fromkeys([gap.label, *gap.examples]) if text]
    texts = [*known, *(rows[i].question for i in members)]
    known_vectors = backend.embed(known).astype(np.float64).reshape(len(known), vectors.shape[1])
    gap.label = texts[int(np.argmax(np.vstack([known_vectors, vectors[members]]) @ gap.centroid))]


def recent_distinct(questions: Sequence[str]) -> list[str]:
    """The last :data:`EXAMPLES` distinct questions (case and white space aside), most recent last."""
    kept: dict[str, str] = {}
    for question in questions:
        key = " ".join(question.casefold().split())
        kept.pop(key, None)
        kept[key] = question
    return list(kept.values())[-EXAMPLES:]


def save(groups: Sequence[Joined], rows: Sequence[AgentRequest], now: datetime.datetime) -> None:
    fields = ["label", "centroid", "model_id", "count", "examples", "first_seen", "last_seen"]
    ContentGap.objects.bulk_create([joined.gap for joined in groups if joined.gap.pk is None])
    ContentGap.objects.bulk_update([joined.gap for joined in groups if joined.gap.pk is not None], fields)
    # Status is the editors' column: only an answered gap that got new questions changes, checked as it is written.
    ContentGap.objects.filter(pk__in=[joined.gap.pk for joined in groups], status=ContentGap.Status.ANSWERED).update(
        status=ContentGap.Status.OPEN
    )
    for joined in groups:
        for position in joined.members:
            rows[position].gap = joined.gap
            rows[position].clustered_at = now
    AgentRequest.objects.bulk_update(rows, ["gap", "clustered_at"], batch_size=1000)


def recentre(backend: EmbeddingBackend) -> list[ContentGap]:
    """Centres of another model (or none) computed again from the gaps' labels and examples, largest gaps first."""
    stale = list(
        ContentGap.objects.exclude(model_id=backend.model_id, centroid__isnull=False)
        .exclude(label="", examples=[])
        .order_by("-count", "pk")[: app_settings.INSIGHTS_GAP_BATCH]
    )
    for gap in stale:
        texts = [text for text in dict.fromkeys([gap.label, *gap.examples]) if text]
        gap.centroid = unit(backend.embed(texts).astype(np.float64).sum(axis=0))
        gap.model_id = backend.model_id
    ContentGap.objects.bulk_update(stale, ["centroid", "model_id"])
    return stale


def refresh_nearest(gaps: Sequence[ContentGap], backend: EmbeddingBackend | None = None) -> None:
    """Each gap's nearest page: the document of the passage most similar to its centre, and the similarity."""
    gaps = [gap for gap in gaps if gap.centroid is not None]
    if not gaps:
        return
    retriever = HybridRetriever(backend)
    if passage_index(retriever.backend) is None:
        return
    best = {}
    for gap in gaps:
        # A full candidate list, not one row: with a filter (the passages of models no longer registered are left
        # out), pgvector's iterative scan would stop at the first row that passes it, which on the HNSW plan of a
        # large site is often not the nearest. The candidates come sorted by distance.
        centre = np.asarray(gap.centroid, dtype=np.float64)
        found = retriever.vector_candidates(centre, Filters(), app_settings.HNSW_EF_SEARCH)
        best[gap.pk] = found[0] if found else None
    documents = dict(
        Passage.objects.filter(pk__in=[hit[0] for hit in best.values() if hit]).values_list("pk", "document_id")
    )
    for gap in gaps:
        hit = best[gap.pk]
        gap.nearest_document_id = documents.get(hit[0]) if hit else None
        gap.nearest_score = round(float(hit[1]), 4) if hit and gap.nearest_document_id else None
    ContentGap.objects.bulk_update(gaps, ["nearest_document", "nearest_score"])


def weak_line() -> float:
    """The similarity under which a page is no match at all for a question (the retrieval's relevance floor)."""
    return HybridRetriever(get_embedding_backend()).relevance_floor


def set_status(gaps: QuerySet[ContentGap], status: str) -> int:
    """An editor's decision on gaps; an answered gap's nearest page is measured again (the new page, if indexed
    already). How many changed."""
    changed = list(gaps.exclude(status=status))
    ContentGap.objects.filter(pk__in=[gap.pk for gap in changed]).update(status=status)
    if status == ContentGap.Status.ANSWERED and changed:
        refresh_nearest(changed)
    return len(changed)
