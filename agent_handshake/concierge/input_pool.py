"""The differential semantic pool: what agents wanted to tell a capability but no input field could hold.

A front door whose protocol has a place for such free text (a schema template's ``other`` key) hands it to
:func:`record` once the rest of the input is valid. The text is untrusted: it is cleaned (control and format
characters removed, white space folded, cut to :data:`MAX_FRAGMENT_CHARS`) and stored with a digest of who sent
it (its agent client, or the client's network), never the sender itself.

:func:`schedule` has the pool updated at most every ``SCHEMA_POOL_UPDATE_SECONDS`` per capability (a Celery task,
or with no broker in the request's process after its commit, as ``INDEX_ON_SAVE`` says; the ``cleanup_sessions``
beat task catches up on the rest). :func:`update` embeds the new fragments with the site's embedding model, lets
each join the existing proposal whose centroid it is close to (``SCHEMA_POOL_SIMILARITY``), and clusters the rest
(:func:`agent_handshake.retrieval.clustering.cluster`). A cluster becomes a
:class:`~agent_handshake.models.ProposedField` (status ``pending``) once it is large and stable enough:
``SCHEMA_POOL_MIN_FRAGMENTS`` fragments from ``SCHEMA_POOL_MIN_SOURCES`` distinct senders, spread over
``SCHEMA_POOL_MIN_SPAN_SECONDS`` (a burst from one agent, or from a few within a minute, is an anomaly, not a
need).

A proposal is named from words that at least half of its fragments and ``SCHEMA_POOL_MIN_SOURCES`` distinct
senders used, and its examples (the fragments closest to its centroid) are kept for editors. None of it is shown to
agents: while a proposal is pending, agents are told of it under a neutral name and a fixed description
(:func:`pending`), since a few agents' words must not reach every other agent before an editor reads them.
Editors approve a proposal (``experimental``), then promote (``stable``) or retire it; while it is published,
:func:`count_use` counts how many senders fill it and how many had a value refused.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import re
import unicodedata
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from celery import current_app
from django.core.cache import caches
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from ..conf import app_settings
from ..indexing import index_on_save_mode
from ..models import ProposedField, UnmappedFragment
from ..registry import capability_registry
from ..retrieval.clustering import cluster, unit
from ..retrieval.embeddings import get_embedding_backend
from . import limits
from .conversation import Owner

logger = logging.getLogger(__name__)

MAX_FRAGMENT_CHARS = 500
#: At most this many loose fragments of one capability are clustered in one pass (the newest).
MAX_POOL = 2000
#: Names a proposal never takes, besides the capability's declared fields: schema templates' free-text key.
RESERVED_NAMES = frozenset({"other"})
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
    """Who sent a fragment, as a keyed digest (``SECRET_KEY``) that counts distinct senders and names none: the
    agent client behind an API key (one client's many keys are one sender), else the client's /24 (IPv4) or /64
    (IPv6) network."""
    if owner.api_key is not None:
        who = f"client:{owner.api_key.client_id}"
    else:
        network = limits.network_of(owner.address)
        if network.count(".") == 3:  # an IPv4 address: its /24
            network = str(ipaddress.IPv4Network(f"{network}/24", strict=False))
        who = f"net:{network}"
    return salted_hmac("agent_handshake.input_pool.source", who, algorithm="sha256").hexdigest()[:32]


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
    """Have the pool updated, at most once per ``SCHEMA_POOL_UPDATE_SECONDS`` per capability (a burst of fragments
    is one update), the way saved content is indexed (``INDEX_ON_SAVE``): a Celery task that runs once the interval
    has passed, or, without a broker ("sync"), in this process now. With "off", or when a "sync" update was
    skipped because one ran within the interval, the ``cleanup_sessions`` beat task (and
    ``agent_cleanup_sessions``) updates every pool that has new fragments (:func:`update_all`)."""
    mode = index_on_save_mode()
    interval = app_settings.SCHEMA_POOL_UPDATE_SECONDS
    if mode == "off" or (interval and not caches[app_settings.CACHE_ALIAS].add(
        f"agent_handshake:input_pool:{capability_name}", 1, interval
    )):  # fmt: skip
        return
    if mode == "celery":
        try:  # found by name: agent_handshake.tasks defines the task and calls this module
            current_app.tasks["agent_handshake.update_input_pool"].apply_async(
                (capability_name,), countdown=interval, retry=False
            )
            return
        except Exception:
            logger.warning("Could not queue the input pool update of %s; updating it here.", capability_name)
    try:
        update(capability_name)
    except Exception:  # the fragments are stored: the next update takes them
        logger.exception("Could not update the input pool of %s", capability_name)


def update(capability_name: str) -> list[ProposedField]:
    """Embed, join and cluster ``capability_name``'s loose fragments (see the module docstring); the proposals
    it created, never named like a declared field of the capability. Safe to run twice and concurrently: one
    capability's pool is updated by one transaction at a time."""
    created: list[ProposedField] = []
    embed_new(capability_name)  # the slow part, outside the lock and any transaction
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"agent_handshake.pool:{capability_name}"])
        forget_expired(capability_name)
        newest = UnmappedFragment.objects.filter(capability=capability_name, proposal=None).exclude(embedding=None)
        loose = list(newest.order_by("-created_at", "-pk")[:MAX_POOL])[::-1]
        if not loose:
            return created
        vectors = np.stack([np.asarray(fragment.embedding, dtype=np.float64) for fragment in loose])
        proposals = list(ProposedField.objects.filter(capability=capability_name).exclude(centroid=None))
        remaining = join(loose, vectors, proposals)
        if remaining:
            taken = {proposal.name for proposal in ProposedField.objects.filter(capability=capability_name)}
            capability = capability_registry.get(capability_name)
            taken |= set(((capability.input_schema if capability else None) or {}).get("properties", {}))
            taken |= RESERVED_NAMES
            created = propose(capability_name, [loose[i] for i in remaining], vectors[remaining], taken)
    return created


def embed_new(capability_name: str) -> None:
    """Embed the capability's fragments that have no embedding yet (the newest :data:`MAX_POOL`)."""
    missing = list(
        UnmappedFragment.objects.filter(capability=capability_name, embedding=None).order_by("-created_at")[:MAX_POOL]
    )
    if missing:
        computed = get_embedding_backend().embed([fragment.text for fragment in missing])
        for fragment, vector in zip(missing, computed, strict=True):
            fragment.embedding = vector
        UnmappedFragment.objects.bulk_update(missing, ["embedding"])


def update_all() -> int:
    """Update every pool that has fragments that joined nothing yet (the beat task's catch-up); how many keys it
    proposed."""
    names = UnmappedFragment.objects.filter(proposal=None).values_list("capability", flat=True).distinct()
    return sum(len(update(name)) for name in sorted(set(names)))


def join(fragments: Sequence[UnmappedFragment], vectors: np.ndarray, proposals: list[ProposedField]) -> list[int]:
    """Let each fragment join the proposal it is closest to, if close enough, whatever the proposal's status (a
    rejected or retired key is not proposed again); the positions of the others."""
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
        proposal.fragments += len(members)  # counted as they join: old fragments are deleted after their retention
        kept = UnmappedFragment.objects.filter(proposal=proposal).values("source").distinct().count()
        proposal.sources = max(proposal.sources, kept)
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


#: How a generated description ends while its proposal waits for an editor (taken off when it is published).
PENDING_NOTE = "Pending an editor's review; an editor may rename it and rewrite this description."


def generated_description(terms: Sequence[str]) -> str:
    about = f" about {', '.join(terms)}" if terms else ""
    return f"Proposed from what agents repeatedly sent as free text{about}, which no key could hold. {PENDING_NOTE}"


def pending(capability_name: str) -> list[ProposedField]:
    """The capability's proposals awaiting an editor."""
    return list(ProposedField.objects.filter(capability=capability_name, status=ProposedField.Status.PENDING))


def count_use(capability_name: str, owner: Owner, filled: Sequence[str] = (), failed: Sequence[str] = ()) -> None:
    """Count published proposals' use by ``owner``: ``filled`` valid values, ``failed`` refused ones (by key name).
    Editors promote or retire a key by these counts, so they count senders (:func:`source_of`, as a proposal's
    ``sources`` does), not requests: one caller repeating a submission counts once per key, for as long as the pool
    remembers who sent what (``SCHEMA_POOL_RETENTION_SECONDS``, in the ``CACHE_ALIAS`` cache). Counted once the
    request's transaction commits: a submission undone is not counted, nor its sender taken as counted."""
    if filled or failed:
        transaction.on_commit(partial(count_senders, capability_name, source_of(owner), tuple(filled), tuple(failed)))


def count_senders(capability_name: str, source: str, filled: Sequence[str], failed: Sequence[str]) -> None:
    published = ProposedField.objects.filter(capability=capability_name, status__in=ProposedField.PUBLISHED)
    cache = caches[app_settings.CACHE_ALIAS]
    try:
        for column, names in (("filled", filled), ("failures", failed)):
            if not names:
                continue
            keys = published.filter(name__in=list(names)).values_list("pk", flat=True)
            new = [pk for pk in keys
                   if cache.add(f"agent_handshake:proposal_use:{column}:{pk}:{source}", 1,
                                app_settings.SCHEMA_POOL_RETENTION_SECONDS)]  # fmt: skip
            if new:
                ProposedField.objects.filter(pk__in=new).update(**{column: F(column) + 1})
    except Exception:  # bookkeeping, after the work committed: never the agent's error
        logger.exception("Could not count the use of the proposed keys of %s", capability_name)


def forget_expired(capability_name: str | None = None) -> int:
    """Delete fragments older than ``SCHEMA_POOL_RETENTION_SECONDS`` (what agents wrote is personal data: a
    proposal keeps its counts, and its few examples for editors); how many."""
    cutoff = timezone.now() - datetime.timedelta(seconds=app_settings.SCHEMA_POOL_RETENTION_SECONDS)
    expired = UnmappedFragment.objects.filter(created_at__lt=cutoff)
    if capability_name is not None:
        expired = expired.filter(capability=capability_name)
    deleted, _ = expired.delete()
    return deleted


def decide(proposal: ProposedField, status: str, user: Any, start: Sequence[str] | None = None) -> bool:
    """An editor's decision on a proposal (the admin checks their permission first), taken only if the proposal
    is still in one of the ``start`` statuses (any, if None); whether it was. The row is locked while it is
    checked and written, so of two editors deciding at once the second sees the first's decision (and
    ``proposal`` then holds the status it found)."""
    with transaction.atomic():
        current = ProposedField.objects.select_for_update().filter(pk=proposal.pk).first()
        if current is None:
            return False
        if start is not None and current.status not in start:
            proposal.status = current.status
            return False
        current.status = status
        current.decided_by = user if getattr(user, "pk", None) else None
        current.decided_at = timezone.now()
        fields = ["status", "decided_by", "decided_at", "updated_at"]
        if status in ProposedField.PUBLISHED and current.description.endswith(PENDING_NOTE):
            # The review the generated text announces has happened: a published key no longer says it is pending.
            current.description = current.description.removesuffix(PENDING_NOTE).rstrip()
            fields.append("description")
        current.save(update_fields=fields)
    for field in fields:
        setattr(proposal, field, getattr(current, field))
    return True
