"""Rate limits of the AHP endpoints (§11) on django-ratelimit's shared-cache counters.

Requests are counted per client IP always, and per ``requesting_agent`` and per API key when the request has
them; the most constrained counter fills the four ``X-RateLimit-*`` headers. Token budgets (§11.4) are
counted per session (on the session row) and per IP per day (a cache counter).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from django.core.cache import caches
from django.http import HttpRequest, HttpResponseBase
from django_ratelimit.core import get_usage

from ..conf import app_settings

GROUP = "agent_handshake:converse"


@dataclass(frozen=True)
class Usage:
    scope: str  # "ip", "agent", "key"
    limit: int
    remaining: int
    reset: int  # Unix time the window ends
    window: int  # seconds
    exceeded: bool

    @property
    def retry_after(self) -> int:
        return max(1, self.reset - int(time.time()))


def client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def _period_seconds(rate: str) -> int:
    unit = rate.split("/", 1)[1][:1]
    return {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


def count_request(request: HttpRequest, scope: str, value: str, rate: str) -> Usage:
    """Count this request against ``value``'s counter in ``scope`` and report the window."""
    usage = get_usage(request, group=f"{GROUP}:{scope}", key=lambda group, request: value, rate=rate, increment=True)
    window = _period_seconds(rate)
    if usage is None:  # RATELIMIT_ENABLE = False
        limit = int(rate.split("/", 1)[0])
        return Usage(scope, limit, limit, int(time.time()) + window, window, False)
    return Usage(
        scope=scope,
        limit=usage["limit"],
        remaining=max(0, usage["limit"] - usage["count"]),
        reset=int(time.time()) + int(usage["time_left"]),
        window=window,
        exceeded=usage["should_limit"],
    )


def most_constrained(usages: list[Usage]) -> Usage:
    exceeded = [usage for usage in usages if usage.exceeded]
    if exceeded:
        return max(exceeded, key=lambda usage: usage.reset)
    return min(usages, key=lambda usage: (usage.remaining, -usage.reset))


def add_headers(response: HttpResponseBase, usage: Usage) -> HttpResponseBase:
    response.headers["X-RateLimit-Limit"] = str(usage.limit)
    response.headers["X-RateLimit-Remaining"] = str(usage.remaining)
    response.headers["X-RateLimit-Reset"] = str(usage.reset)
    response.headers["X-RateLimit-Window"] = str(usage.window)
    if usage.exceeded:
        response.headers["Retry-After"] = str(usage.retry_after)
    return response


def session_budget() -> int:
    budget = app_settings.RATE_LIMITS.get("unauthenticated", {}).get("token_budget", "")
    return int(budget.split("/", 1)[0]) if budget else 0


def _daily_key(ip: str) -> str:
    return f"agent_handshake:tokens:{ip}:{datetime.date.today().isoformat()}"


def seconds_until_tomorrow() -> int:
    now = datetime.datetime.now()
    tomorrow = datetime.datetime.combine(now.date() + datetime.timedelta(days=1), datetime.time.min)
    return int((tomorrow - now).total_seconds()) + 1


def daily_tokens_used(ip: str) -> int:
    return int(caches[app_settings.CACHE_ALIAS].get(_daily_key(ip), 0))


def add_daily_tokens(ip: str, tokens: int) -> None:
    if tokens <= 0:
        return
    cache = caches[app_settings.CACHE_ALIAS]
    key = _daily_key(ip)
    cache.add(key, 0, 86400 + 3600)
    try:
        cache.incr(key, tokens)
    except ValueError:  # expired between add and incr
        cache.set(key, tokens, 86400 + 3600)
