"""The differential semantic pool: what agents wanted to tell a capability but no input field could hold.

A front door whose protocol has a place for such free text (a schema template's ``other`` key) hands it to
:func:`record` once the rest of the input is valid. The text is untrusted: it is cleaned (control and format
characters removed, white space folded, cut to :data:`MAX_FRAGMENT_CHARS`) and stored with a digest of who sent
it (an API key's id, or the client's network), never the sender itself.

Off the request path (:func:`schedule`: Celery, or in process after the commit, as ``INDEX_ON_SAVE`` says),
:func:`update` embeds the new fragments with the site's embedding model, lets each join the existing proposal
whose centroid it is close to (``SCHEMA_POOL_SIMILARITY``), and clusters the rest
(:func:`agent_handshake.retrieval.clustering.cluster`). A cluster becomes a
:class:`~agent_handshake.models.ProposedField` (status ``pending``) once it is large and stable enough:
``SCHEMA_POOL_MIN_FRAGMENTS`` fragments from ``SCHEMA_POOL_MIN_SOURCES`` distinct senders, spread over
``SCHEMA_POOL_MIN_SPAN_SECONDS`` (a burst from one agent, or from a few within a minute, is an anomaly, not a
need).

A proposal's name and the words of its generated description are only words that at least half of its fragments
and ``SCHEMA_POOL_MIN_SOURCES`` distinct senders used: what one agent wrote is never shown to another. Its
examples (the fragments closest to its centroid) are for editors in the admin only. Editors approve a proposal
(``experimental``), then promote (``stable``) or retire it; while it is published, :func:`count_use` counts how
often agents fill it and how often its value is refused.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import re
import unicodedata
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from ..conf import app_settings
from ..models import ProposedField, UnmappedFragment
from ..retrieval.clustering import cluster, unit
from ..retrieval.embeddings import get_embedding_backend
from . import limits
from .conversation import Owner

logger = logging.getLogger(__name__)

MAX_FRAGMENT_CHARS = 500
#: At most this many loose fragments of one capability are clustered in one pass (the newest are kept).
MAX_POOL = 5000
EXAMPLES = 5
WORD = re.compile(r"[a-z][a-z0-9]{2,}")
STOPWORDS = frozenset(
    """about above after again against all also and any are because been before being below between both but can
    could did does doing don down during each few for from further had has have having her here hers him his how
    into its itself just like more most much must need needs not now off once only other our ours out over own
    please same she should some such than that the their theirs them then there these they this those through too
    under until very want wants was were what when where which while who whom why will with would you your yours
    make made get got give given put let""".split()
)
INTEGER = re.compile(r"[+-]?\d+")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
BOOLEAN_WORDS = frozenset({"yes", "no", "true", "false"})


def clean(text: str) -> str:
    """``text`` as untrusted prose: no control or format characters (bidi overrides, zero-width...), white space
    folded, at most :data:`MAX_FRAGMENT_CHARS` characters (cut at a word)."""
    kept = "".join(" " if unicodedata.category(char)[0] in "CZ" else char for char in text)
    folded = " ".join(kept.split())
    if len(folded) > MAX_FRAGMENT_CHARS:
        folded = folded[:MAX_FRAGMENT_CHARS].rsplit(" ", 1)[0]
    return folded


def source_of(owner: Owner) -> str:
    """Who sent a fragment, as a digest that counts distinct senders and names none."""
    who = f"key:{owner.api_key.pk}" if owner.api_key is not None else f"net:{limits.network_of(owner.address)}"
    return hashlib.sha256(who.encode()).hexdigest()[:32]


def record(capability_name: str, text: str, owner: Owner) -> UnmappedFragment | None:
    """Keep ``text`` (cleaned) in ``capability_name``'s pool and schedule the pool's update; None if nothing is
    left of it once cleaned."""
    text = clean(text)
    if not text:
        return None
    fragment = UnmappedFragment.objects.create(capability=capability_name, text=text, source=source_of(owner))
    transaction.on_commit(partial(schedule, capability_name))
    return fragment


def schedule(capability_name: str) -> None:
    """Update the pool off the request path, the way saved content is indexed (``INDEX_ON_SAVE``)."""
    from ..signal_handlers import index_on_save_mode

    mode = index_on_save_mode()
    if mode == "celery":
        from ..tasks import update_input_pool

        try:
            update_input_pool.apply_async((capability_name,), retry=False)
            return
        except Exception:
            logger.warning("Could not queue the input pool update of %s; updating it here.", capability_name)
    if mode != "off":
        try:
            update(capability_name)
        except Exception:  # the fragment is stored: the next update (or `agent_input_pool`) takes it
            logger.exception("Could not update the input pool of %s", capability_name)


def update(capability_name: str) -> list[ProposedField]:
    """Embed, join and cluster ``capability_name``'s loose fragments (see the module docstring); the proposals
    it created. Safe to run twice and concurrently: one capability's pool is updated by one transaction at a
    time."""
    created: list[ProposedField] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"agent_handshake.pool:{capability_name}"])
        forget_expired(capability_name)
        loose = list(
            UnmappedFragment.objects.filter(capability=capability_name, proposal=None).order_by("-created_at", "-pk")[
                :MAX_POOL
            ]
        )[::-1]
        if not loose:
            return created
        vectors = embedded(loose)
        proposals = list(ProposedField.objects.filter(capability=capability_name).exclude(centroid=None))
        remaining = join(loose, vectors, proposals)
        if remaining:
            taken = {proposal.name for proposal in proposals}
            created = propose(capability_name, [loose[i] for i in remaining], vectors[remaining], taken)
    return created


def embedded(fragments: Sequence[UnmappedFragment]) -> np.ndarray:
    """The fragments' embeddings (unit rows), computing and storing the missing ones."""
    missing = [fragment for fragment in fragments if fragment.embedding is None]
    if missing:
        computed = get_embedding_backend().embed([fragment.text for fragment in missing])
        for fragment, vector in zip(missing, computed, strict=True):
            fragment.embedding = vector
        UnmappedFragment.objects.bulk_update(missing, ["embedding"])
    return np.stack([np.asarray(fragment.embedding, dtype=np.float64) for fragment in fragments])


def join(fragments: Sequence[UnmappedFragment], vectors: np.ndarray, proposals: list[ProposedField]) -> list[int]:
    """Let each fragment join the proposal it is closest to, if close enough; the positions of the others."""
    if not proposals:
        return list(range(len(fragments)))
    threshold = app_settings.SCHEMA_POOL_SIMILARITY
    similarities = vectors @ np.stack([np.asarray(p.centroid, dtype=np.float64) for p in proposals]).T
    nearest = np.argmax(similarities, axis=1)
    remaining, joined = [], {}
    for index, fragment in enumerate(fragments):
        best = int(nearest[index])
        if similarities[index, best] < threshold:
            remaining.append(index)
            continue
        fragment.proposal = proposals[best]
        joined.setdefault(best, []).append(index)
    for best, members in joined.items():
        proposal = proposals[best]
        centroid = np.asarray(proposal.centroid, dtype=np.float64) * proposal.fragments + vectors[members].sum(axis=0)
        proposal.centroid = unit(centroid)
        UnmappedFragment.objects.bulk_update([fragments[i] for i in members], ["proposal"])
        proposal.fragments = UnmappedFragment.objects.filter(proposal=proposal).count()
        proposal.sources = UnmappedFragment.objects.filter(proposal=proposal).values("source").distinct().count()
        proposal.save(update_fields=["centroid", "fragments", "sources", "updated_at"])
    return remaining


def mature(members: Sequence[UnmappedFragment]) -> bool:
    """Large and stable enough to propose (see the module docstring)."""
    if len(members) < app_settings.SCHEMA_POOL_MIN_FRAGMENTS:
        return False
    if len({fragment.source for fragment in members}) < app_settings.SCHEMA_POOL_MIN_SOURCES:
        return False
    moments = [fragment.created_at for fragment in members]
    span = max(moments) - min(moments)
    return span >= datetime.timedelta(seconds=app_settings.SCHEMA_POOL_MIN_SPAN_SECONDS)


def propose(
    capability_name: str, fragments: list[UnmappedFragment], vectors: np.ndarray, taken: set[str]
) -> list[ProposedField]:
    """Pending proposals from the mature clusters of ``fragments`` (whose other clusters stay loose)."""
    created = []
    for group in cluster(vectors, app_settings.SCHEMA_POOL_SIMILARITY):
        members = [fragments[i] for i in group.members]
        if not mature(members):
            continue
        terms = shared_words(members)
        name = free_name("_".join(terms[:2]) or "request_detail", taken)
        taken.add(name)
        central = np.argsort(-(vectors[group.members] @ group.centroid))[:EXAMPLES]
        proposal = ProposedField.objects.create(
            capability=capability_name,
            name=name,
            value_type=value_type([fragment.text for fragment in members]),
            description=generated_description(terms),
            centroid=group.centroid,
            fragments=len(members),
            sources=len({fragment.source for fragment in members}),
            examples=[members[int(i)].text for i in central],
        )
        for fragment in members:
            fragment.proposal = proposal
        UnmappedFragment.objects.bulk_update(members, ["proposal"])
        created.append(proposal)
    return created


def shared_words(members: Sequence[UnmappedFragment]) -> list[str]:
    """Words used by at least half of the fragments and by ``SCHEMA_POOL_MIN_SOURCES`` distinct senders, the most
    used first (ties: the first seen first)."""
    fragments_of: dict[str, set[int]] = {}
    sources_of: dict[str, set[str]] = {}
    for index, fragment in enumerate(members):
        for word in WORD.findall(fragment.text.lower()):
            if word in STOPWORDS:
                continue
            fragments_of.setdefault(word, set()).add(index)
            sources_of.setdefault(word, set()).add(fragment.source)
    least_sources = app_settings.SCHEMA_POOL_MIN_SOURCES
    common = [
        word
        for word, indexes in fragments_of.items()
        if 2 * len(indexes) >= len(members) and len(sources_of[word]) >= least_sources
    ]
    return sorted(common, key=lambda word: -len(fragments_of[word]))[:5]  # stable: first seen first on ties


def free_name(name: str, taken: set[str]) -> str:
    name = name[:56]
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = f"{name}_{number}", number + 1
    return candidate


def value_type(texts: Sequence[str]) -> str:
    """The JSON type every fragment would fit: integer, number, boolean, else string."""
    stripped = [text.strip().lower() for text in texts]
    if all(INTEGER.fullmatch(text) for text in stripped):
        return "integer"
    if all(NUMBER.fullmatch(text) for text in stripped):
        return "number"
    if all(text in BOOLEAN_WORDS for text in stripped):
        return "boolean"
    return "string"


def generated_description(terms: Sequence[str]) -> str:
    about = f" about {', '.join(terms)}" if terms else ""
    return (
        f"Proposed from what agents repeatedly sent as free text{about}, which no key could hold. Pending an "
        "editor's review; an editor may rename it and rewrite this description."
    )


def pending(capability_name: str) -> list[ProposedField]:
    return list(ProposedField.objects.filter(capability=capability_name, status=ProposedField.Status.PENDING))


def count_use(capability_name: str, filled: Sequence[str] = (), failed: Sequence[str] = ()) -> None:
    """Count published proposals' use: ``filled`` valid values, ``failed`` refused ones (by key name)."""
    published = ProposedField.objects.filter(capability=capability_name, status__in=ProposedField.PUBLISHED)
    if filled:
        published.filter(name__in=list(filled)).update(filled=F("filled") + 1)
    if failed:
        published.filter(name__in=list(failed)).update(failures=F("failures") + 1)


def forget_expired(capability_name: str | None = None) -> int:
    """Delete fragments that joined no proposal within ``SCHEMA_POOL_RETENTION_SECONDS``; how many."""
    cutoff = timezone.now() - datetime.timedelta(seconds=app_settings.SCHEMA_POOL_RETENTION_SECONDS)
    expired = UnmappedFragment.objects.filter(proposal=None, created_at__lt=cutoff)
    if capability_name is not None:
        expired = expired.filter(capability=capability_name)
    deleted, _ = expired.delete()
    return deleted


def decide(proposal: ProposedField, status: str, user: Any) -> None:
    """An editor's decision on a proposal (the admin checks their permission first)."""
    proposal.status = status
    proposal.decided_by = user if getattr(user, "pk", None) else None
    proposal.decided_at = timezone.now()
    proposal.save(update_fields=["status", "decided_by", "decided_at", "updated_at"])
