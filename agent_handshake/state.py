"""A snapshot of everything the generated documents depend on, and the version token that names it.

The token is derived from the database (the site profile, the signal overrides, the documents' latest
change, count and how many wait for their passages), the settings and the registries, so every process
computes the same token for the same state: it is the ETag seed and part of every cache key. A process keeps
its snapshot for ``STATE_TTL`` seconds; saves made through Django drop it at once (see ``signal_handlers``), and so
does a change to the registries (the ``registry_changed`` signal), whenever it is made.

The documents' Last-Modified is when the state became the current one (see :func:`since`), kept in the shared
cache, so that it moves forward whenever the token changes and every process sends the same one.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import operator
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.core.cache import caches
from django.core.signals import setting_changed
from django.db.models import Count, F, Max, Q
from django.dispatch import receiver

from . import content_signals
from .conf import SETTING_NAME, app_settings
from .models import ContentSignalOverride, Document, SiteProfile
from .registry import Capability, capability_registry, content_registry
from .signals import registry_changed

EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
#: The states' history in the ``CACHE_ALIAS`` cache: ``<CLOCK>:<n>`` holds generation n's (token, second) and
#: ``CLOCK`` the newest generation number a process saw (a hint: the newer ones are looked for after it).
CLOCK = "agent_handshake:state-clock"
#: A generation is forgotten after a week; the one after a forgotten one starts from the present again.
CLOCK_TIMEOUT = 7 * 24 * 3600
#: At most this many generations are read or tried per snapshot (the hint is rarely more than one behind).
CLOCK_STEPS = 32


@dataclass(frozen=True)
class Snapshot:
    token: str
    last_modified: datetime.datetime
    name: str
    description: str
    contact: dict[str, str]
    site_signals: dict[str, bool]
    #: The site profile's schema.org type URL and opening hours ({label: hours}), for the IntentWeb manifest.
    schema_type: str = ""
    hours: dict[str, str] = field(default_factory=dict)
    #: Effective signals of registered models that have an override, by model label ("blog.post").
    model_signals: dict[str, dict[str, bool]] = field(default_factory=dict)
    document_count: int = 0
    #: ``Content-Signal`` header values by model label, None for the site-wide one (built once, sent often).
    signal_headers: dict[str | None, str] = field(default_factory=dict)

    @property
    def last_modified_timestamp(self) -> int:
        return int(self.last_modified.timestamp())

    def signals_for(self, label: str | None) -> dict[str, bool]:
        if label is None:
            return self.site_signals
        return self.model_signals.get(label, self.site_signals)

    def signal_header(self, label: str | None = None) -> str:
        """The ``Content-Signal`` header value for a model's pages (the site's when ``label`` is None)."""
        return self.signal_headers.get(label) or self.signal_headers[None]


_lock = threading.Lock()
_current: tuple[float, Snapshot] | None = None


def capabilities_digest() -> str:
    """A digest of the registered capabilities as the documents publish them (every field but the callables:
    names, descriptions, input and output schemas, scopes, limits...).

    They come from code, so a release can change a schema or a description and nothing in the database: with the
    names alone in the token, its processes kept serving the manifest and /openapi.json that the shared cache held
    under the old token, with the old ETag. Remembered for the registry's current capability objects (a
    registration replaces the object, which is a new digest).
    """
    global _digested
    capabilities = tuple(capability_registry)
    known = _digested
    if known is not None and len(known[0]) == len(capabilities) and all(map(operator.is_, known[0], capabilities)):
        return known[1]
    published = [
        {f.name: getattr(capability, f.name) for f in dataclasses.fields(capability) if f.repr}
        for capability in capabilities
    ]
    digest = hashlib.sha256(json.dumps(published, sort_keys=True, default=repr).encode()).hexdigest()[:16]
    _digested = (capabilities, digest)
    return digest


_digested: tuple[tuple[Capability, ...], str] | None = None


def _build() -> Snapshot:
    profile = SiteProfile.load()
    site_signals = profile.content_signals()
    overrides = list(ContentSignalOverride.objects.select_related("content_type").order_by("pk"))
    # Documents whose passages are not rebuilt yet (a Celery indexer embeds after the document is written): the
    # token changes again when they are, so no answer cached from the old passages outlives them.
    docs = Document.objects.aggregate(
        latest=Max("updated_at"), count=Count("pk"), pending=Count("pk", filter=~Q(indexed_hash=F("content_hash")))
    )

    changed = [profile.updated_at, docs["latest"], *(o.updated_at for o in overrides)]
    latest_change = max((moment for moment in changed if moment is not None), default=EPOCH)
    parts = [
        app_settings.fingerprint,
        ",".join(config.label for config in content_registry),
        capabilities_digest(),
        str(profile.updated_at),
        str(docs["count"]),
        str(docs["latest"]),
        str(docs["pending"]),
        *(f"{o.pk}:{o.content_type_id}:{o.updated_at}" for o in overrides),
    ]
    token = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
    last_modified = since(token, int(latest_change.timestamp()))
    model_signals = {f"{o.content_type.app_label}.{o.content_type.model}": o.apply(site_signals) for o in overrides}
    return Snapshot(
        token=token,
        last_modified=datetime.datetime.fromtimestamp(last_modified, datetime.timezone.utc),
        name=profile.name or app_settings.SITE_NAME,
        description=profile.description or app_settings.SITE_DESCRIPTION,
        contact=profile.contact(),
        schema_type=profile.schema_type,
        hours=profile.hours(),
        site_signals=site_signals,
        model_signals=model_signals,
        document_count=docs["count"],
        signal_headers={
            None: content_signals.header_value(site_signals),
            **{label: content_signals.header_value(signals) for label, signals in model_signals.items()},
        },
    )


def since(token: str, latest_change: int) -> int:
    """When the state became ``token`` (a Unix second): the documents' Last-Modified.

    The database's latest ``updated_at`` alone is not one: deleting or unpublishing an object, removing a signal
    override, a release that changes the capabilities, or two edits in one second change the documents (and the
    token) but not that date, or move it back, and a client that revalidates by date only would be told 304 and
    keep the old document. So the shared cache keeps the states' history as numbered generations, each added with
    ``cache.add`` (atomic in Redis, Memcached and the database cache: two processes that see two new states at
    once make two generations) and each a second later than the one before it. A process takes the newest
    generation's second when that generation is its token, and adds the next one otherwise: a state seen again
    after another (the list before an article was published, once it is deleted) is a new generation, later.
    """
    cache = caches[app_settings.CACHE_ALIAS]
    hint = cache.get(CLOCK)
    generation = hint if isinstance(hint, int) and hint >= 0 else 0
    newest: tuple[str, int] | None = None
    for _ in range(CLOCK_STEPS):
        entry = cache.get(f"{CLOCK}:{generation}")
        if entry is not None:  # not the newest yet
            newest, generation = entry, generation + 1
            continue
        if newest is not None and newest[0] == token:
            second = newest[1]
            generation -= 1
            break
        second = max(int(time.time()), latest_change, newest[1] + 1 if newest else 0)
        if cache.add(f"{CLOCK}:{generation}", (token, second), CLOCK_TIMEOUT):
            break
        # Another process added this generation first: read it on the next step.
    else:  # a history too far ahead of the hint to walk now: later than any state it has read
        second = max(int(time.time()), latest_change, newest[1] + 1 if newest else 0)
    if generation != hint:
        cache.set(CLOCK, generation, None)
    return second


def snapshot() -> Snapshot:
    """The current snapshot, rebuilt when older than ``STATE_TTL`` seconds."""
    global _current
    current = _current
    now = time.monotonic()
    if current is not None and now - current[0] < app_settings.STATE_TTL:
        return current[1]
    with _lock:
        current = _current
        if current is not None and now - current[0] < app_settings.STATE_TTL:
            return current[1]
        built = _build()
        _current = (time.monotonic(), built)
        return built


# Rendered bodies this process has used lately, in front of the shared cache (no unpickling on the hot path).
# Keys carry the state token, so a new state simply misses; the dict is emptied when it grows.
_recent_bodies: dict[str, bytes] = {}
_RECENT_LIMIT = 64


def cached_body(key: str, render: Callable[[], str | bytes]) -> bytes:
    """The body stored under ``key`` in this process or the shared cache, else ``render()``-ed and stored."""
    body = _recent_bodies.get(key)
    if body is None:
        cache = caches[app_settings.CACHE_ALIAS]
        body = cache.get(key)
        if body is None:
            rendered = render()
            body = rendered.encode() if isinstance(rendered, str) else rendered
            cache.set(key, body, app_settings.CACHE_TIMEOUT)
        if len(_recent_bodies) >= _RECENT_LIMIT:
            _recent_bodies.clear()
        _recent_bodies[key] = body
    return body


def invalidate() -> None:
    """Forget the snapshot so the next request rebuilds it (called after a relevant save commits)."""
    global _current
    _current = None
    _recent_bodies.clear()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    if setting == SETTING_NAME:
        invalidate()


@receiver(registry_changed)
def _registry_changed(**kwargs: object) -> None:
    # The token names the registered models and capabilities, but a snapshot built before a registration (an app's
    # ready() after ours, a model registered at runtime) would keep the old token, and the documents cached under
    # it, for STATE_TTL.
    invalidate()
