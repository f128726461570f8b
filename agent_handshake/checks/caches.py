"""The caches the rate limits and token budgets count in: each one exists (E016) and, outside ``DEBUG``, counts
atomically and keeps its counters (W008).

The limits are published in the manifest, and agents plan by them. A cache that keeps nothing, or increments with
a read and a write, lets every request through without a word, so the published limits are not the enforced ones.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from ..conf import app_settings

#: Caches whose counters the rate limits and token budgets cannot rely on, and why.
UNCOUNTED_CACHES = {
    "django.core.cache.backends.dummy.DummyCache": "keeps nothing, so no limit or token budget is ever reached",
    "django.core.cache.backends.db.DatabaseCache": "increments with a read and a write, so concurrent requests "
    "lose counts",
    "django.core.cache.backends.filebased.FileBasedCache": "increments with a read and a write, so concurrent "
    "requests lose counts",
}


#: What the counters in each cache setting's cache enforce.
COUNTED_IN = {
    "CACHE_ALIAS": "the daily token budgets",
    "RATELIMIT_USE_CACHE": "the request rate limits",
}


def counting_caches() -> dict[str, list[str]]:
    """The caches the limits count in, each with the settings that name it: ``CACHE_ALIAS`` (the token budgets) and
    django-ratelimit's ``RATELIMIT_USE_CACHE`` ("default" unless set; the request counts), which is not
    ``CACHE_ALIAS``: a site that points ``CACHE_ALIAS`` at Redis still counts requests in "default"."""
    named: dict[str, list[str]] = {}
    named.setdefault(app_settings.CACHE_ALIAS, []).append("CACHE_ALIAS")
    if getattr(settings, "RATELIMIT_ENABLE", True):
        named.setdefault(getattr(settings, "RATELIMIT_USE_CACHE", "default"), []).append("RATELIMIT_USE_CACHE")
    return named


@register(Tags.caches, Tags.security)
def check_cache(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """Each cache the limits count in (:func:`counting_caches`) must exist (E016: else every agent request fails)
    and, outside DEBUG (a development site may not care), count atomically and keep its counters (W008)."""
    caches = getattr(settings, "CACHES", {})
    messages: list[Error | Warning] = []
    for alias, names in counting_caches().items():
        messages += _counting_cache_messages(alias, names, caches)
    return messages


def _counting_cache_messages(alias: str, names: list[str], caches: dict) -> list[Error | Warning]:
    """E016 or W008 for the cache ``alias``, which the settings ``names`` name."""
    which = " and ".join(names)
    if alias not in caches:
        return [
            Error(
                f"{which} names {alias!r}, which is not in CACHES: every request counted there fails.",
                hint=f"Name a cache of CACHES in {which}.",
                id="agent_handshake.E016",
            )
        ]
    backend = caches[alias].get("BACKEND", "")
    if settings.DEBUG or backend not in UNCOUNTED_CACHES:
        return []
    counted = " and ".join(COUNTED_IN[name] for name in names)
    return [
        Warning(
            f"The cache {which} names ({alias!r}, {backend}) {UNCOUNTED_CACHES[backend]}: {counted} are not "
            "enforced as published.",
            hint=f"Use Redis or Memcached (or, with one process, the local-memory cache) for {which}.",
            id="agent_handshake.W008",
        )
    ]
