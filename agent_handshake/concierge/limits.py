"""Rate limits of the front doors (AHP §11) on django-ratelimit's shared-cache counters.

A request with an API key is counted per key, and by nothing a sender declares about itself; an anonymous one per
client network (an IPv4 address, or an IPv6 /64, which one subscriber usually holds whole, of the address the front
door found) and per ``requesting_agent`` name *from that network*, so a name never spends another sender's quota.
The most constrained counter is what the front door reports in the four ``X-RateLimit-*`` headers; on a 429, the one
that binds: of the counters that will refuse the request again (:meth:`Counter.waits`), the last to reset, whose
wait is ``Retry-After`` (:meth:`Counter.reported`). Nothing here reads an HTTP request or writes a response.

Token budgets (§11.4) are counted per session (on the session row, the budget of the session's tier) and per
client network per day (a cache counter). An answer reserves what it may spend on both before it starts
(:func:`reserve_tokens`), so requests sent at once cannot all find the same last tokens left; on the daily budget a
reservation counts for a bounded time, so one its process never released (killed mid-answer) does not hold the
budget until the next day; a budget only its reservations fill is not spent, and is waited for until they end.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import time
from dataclasses import dataclass, replace

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.db.models import F
from django_ratelimit.core import get_usage

from ..conf import app_settings
from ..models import ConverseSession
from . import errors

GROUP = "agent_handshake:converse"


@dataclass(frozen=True)
class Usage:
    scope: str  # "ip", "agent", "key", "capability:<name>", "daily_tokens", "did_network"
    limit: int
    remaining: int
    reset: int  # Unix time the window ends
    window: int  # seconds
    exceeded: bool

    @property
    def public_scope(self) -> str:
        """The ``scope`` of a 429 body: the response schema knows "ip", "agent", "session" and
        "session_tokens"; an API key identifies an agent, so per-key and per-capability limits say "agent", and
        the daily token budget is the client network's ("ip")."""
        if self.scope in (DAILY_TOKENS, DID_NETWORK):
            return "ip"
        return self.scope if self.scope in ("ip", "agent", "session", "session_tokens") else "agent"

    @property
    def retry_after(self) -> int:
        return max(1, self.reset - int(time.time()))


IPV6_PREFIX = 64


def network_of(address: str | None) -> str:
    """The bucket ``address`` is counted in: an IPv4 address alone, an IPv6 address's /64 ("unknown": None)."""
    if not address:
        return "unknown"
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False))
    return str(ip)


def _period_seconds(rate: str) -> int:
    unit = rate.split("/", 1)[1][:1]
    return {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


def count_request(scope: str, value: str, rate: str, *, increment: bool = True) -> Usage:
    """Count this request against ``value``'s counter in ``scope`` and report the window (``increment`` False: report
    the counter as it stands, counting nothing).

    django-ratelimit reads a request only for what is given here (the key, the group, every method), so none is
    passed: the counting is the same from any front door, or from a worker.

    The counter is one per window length, whatever the rate's number, which is applied here: django-ratelimit keys
    a counter by its whole rate, so a verified agent whose trust moved it to another tier mid-window (another
    ``RATE_LIMITS`` entry) started a new count beside the old one, and had both tiers' requests in the window.
    """
    limit, window = int(rate.split("/", 1)[0]), _period_seconds(rate)
    group = f"{GROUP}:{scope}"
    usage = get_usage(None, group=group, key=lambda group, request: value, rate=(0, window), increment=increment)
    if usage is None:  # RATELIMIT_ENABLE = False
        return Usage(scope, limit, limit, int(time.time()) + window, window, False)
    count = usage["count"]
    # The cache did not answer (an increment counts 1 at least): refused, as django-ratelimit does.
    failed = increment and count == 0
    return Usage(
        scope=scope,
        limit=limit,
        remaining=0 if failed else max(0, limit - count),
        reset=int(time.time()) + max(0, int(usage["time_left"])),
        window=window,
        exceeded=failed or count > limit,
    )


def tier_rate(tier: str) -> str:
    default = "120/minute" if tier == "authenticated" else "30/minute"
    return app_settings.RATE_LIMITS.get(tier, {}).get("requests") or default


def count_did_network(address: str | None) -> Usage | None:
    """The count of the requests this client network's verified agents make together (``DID_NETWORK_RATE_LIMIT``),
    or None when there is no such ceiling. Each DID is counted on its own too; this one counts what self-issued
    identities cannot multiply."""
    rate = app_settings.DID_NETWORK_RATE_LIMIT
    if not rate:
        return None
    if "/" not in rate:
        rate = tier_rate(rate)
    return count_request(DID_NETWORK, network_of(address), rate)


def count_ip(address: str | None, *, increment: bool = True) -> Usage:
    """The per-IP count of anonymous requests (and of requests whose credentials were refused) from ``address``'s
    network; ``increment`` False: as it stands, this request uncounted."""
    return count_request("ip", network_of(address), tier_rate("unauthenticated"), increment=increment)


class Counter:
    """The counters of one request: per API key once its credentials are checked (§11.2: authenticated agents
    get their own, larger limit, not their IP's), else per IP. Credentials may come in the body, so nothing is
    counted before it is read. Refused credentials and requests that never reach the check (a malformed or
    oversize body) count per IP, like anonymous requests, so guessing keys is limited too."""

    def __init__(self, address: str | None) -> None:
        #: The client's address (:func:`~agent_handshake.frontdoor.client_address`): the anonymous counts are its
        #: network's.
        self.address = address
        self.usages: list[Usage] = []
        self.ip: Usage | None = None

    def count_ip(self) -> Usage:
        """This request's per-IP count (counted once), as :meth:`refusal` reports it."""
        if self.ip is None:
            self.ip = count_ip(self.address)
            self.usages.append(self.ip)
        return self.refusal(self.ip)

    def peek_ip(self) -> None:
        """The per-IP count as it stands, for the headers of a request that is not counted (an ``OPTIONS``, a
        browser's CORS preflight: it does no work and carries no credentials, so counted it would spend a keyed
        page's network's anonymous quota, and a 429 to it fails the page's request whatever its key allows)."""
        self.usages.append(count_ip(self.address, increment=False))

    def add(self, usage: Usage) -> Usage:
        """Add a count of this request; ``usage`` as :meth:`refusal` reports it."""
        self.usages.append(usage)
        return self.refusal(usage)

    def waits(self) -> list[Usage]:
        """The counters that will refuse this request again until they reset: each with nothing left in its window
        (the one that refused it, and any this request used up), and the client network's daily token budget
        while it is spent. A request count is taken before the request says what it is for, so a request it
        refuses may be a question the budget would refuse next; a capability's own limit refuses a MODE3 call,
        which spends no tokens, and then the budget is not waited for."""
        waits = [usage for usage in self.usages if usage.remaining == 0]
        if not any(usage.exceeded and usage.scope.startswith("capability:") for usage in self.usages):
            daily = daily_usage(network_of(self.address))
            if daily is not None and daily.exceeded:
                waits.append(daily)
        return waits

    def refusal(self, usage: Usage) -> Usage:
        """``usage``; when it refuses the request, with the reset of the last of :meth:`waits`, so that the 429 a
        front door raises from it names the counter that refused and the earliest moment a retry can succeed.
        Told the wait of the first counter to refuse, an agent would be refused again by the next (a name's
        minute over, its network's count for the day)."""
        if not usage.exceeded:
            return usage
        return replace(usage, reset=max(wait.reset for wait in [usage, *self.waits()]))

    def reported(self, refused: bool) -> tuple[Usage, int | None]:
        """What the front door's four ``X-RateLimit-*`` headers report, and on a 429 (``refused``) the seconds of
        its ``Retry-After`` (§11.1: on every 429). Normally the most constrained counter; on a 429, the one that
        binds (the last of :meth:`waits` to reset). Without a counter to wait for (a session's turns or tokens:
        the same session will not do), a new session may ask at once: the shortest wait, one second."""
        if not self.usages:  # the request never reached the credentials check
            self.count_ip()
        if not refused:
            return most_constrained(self.usages), None
        waits = self.waits()
        if not waits:
            return most_constrained(self.usages), 1
        binding = max(waits, key=lambda usage: usage.reset)
        return binding, binding.retry_after


def count_key(key_id: str, tier: str = "authenticated") -> Usage:
    """An API key's count (a verified agent's key counts under its trust tier's ``RATE_LIMITS`` entry)."""
    return count_request("key", key_id, tier_rate(tier))


def count_agent(address: str | None, requesting_agent: str) -> Usage | None:
    """An anonymous request's count per ``requesting_agent`` name *and client network* (None: no such limit).

    The name is an unverified hint (AHP §8.1): counted across senders, anyone could exhaust a named agent's
    quota by sending its name, so it only splits one sender's own traffic (§11.3 lets a site add this scope).
    Requests with an API key are never counted by name: the key is who they are.
    """
    rate = app_settings.AGENT_RATE_LIMIT
    if not rate:
        return None
    return count_request("agent", f"{network_of(address)} {requesting_agent}", rate)


def most_constrained(usages: list[Usage]) -> Usage:
    exceeded = [usage for usage in usages if usage.exceeded]
    if exceeded:
        return max(exceeded, key=lambda usage: usage.reset)
    return min(usages, key=lambda usage: (usage.remaining, -usage.reset))


def session_budget(tier: str) -> int:
    """The tokens one session of ``tier`` ("unauthenticated": anonymous, "authenticated": started with an API
    key) may spend, as RATE_LIMITS publishes it in the manifest (0: no budget)."""
    budget = app_settings.RATE_LIMITS.get(tier, {}).get("token_budget")
    return int(budget.split("/", 1)[0]) if budget else 0


def _daily_key(ip: str, now: float) -> str:
    return f"agent_handshake:tokens:{ip}:{datetime.date.fromtimestamp(now).isoformat()}"


def seconds_until_tomorrow(now: float | None = None) -> int:
    """The seconds from ``now`` (a Unix time; None: now) to the next local midnight, when the day's counter
    starts again."""
    moment = datetime.datetime.now() if now is None else datetime.datetime.fromtimestamp(now)
    tomorrow = datetime.datetime.combine(moment.date() + datetime.timedelta(days=1), datetime.time.min)
    return int((tomorrow - moment).total_seconds()) + 1


DAILY_TTL = 86400 + 3600

#: Reservations on the daily budget are counted per slot of this many seconds, and one counts while the reader's
#: slot is its own or a neighbour: a reservation never released stops counting after one to two slots. An answer
#: still being written after that no longer holds its tokens (what it spends is counted when it is done).
RESERVATION_SLOT_SECONDS = 300
#: How long a slot's counter is kept: while a reader in its own slot or a neighbour may count it.
HELD_TTL = 3 * RESERVATION_SLOT_SECONDS


def _held_slots(now: float) -> list[int]:
    """The slots whose reservations count at ``now``: its own first (where one reserves), then the slots either
    side (a neighbour: another process's clock may be a little ahead or behind)."""
    slot = int(now // RESERVATION_SLOT_SECONDS)
    return [slot, slot - 1, slot + 1]


def _held_key(ip: str, slot: int) -> str:
    return f"agent_handshake:tokens-held:{ip}:{slot}"


def _held_keys(ip: str, now: float) -> list[str]:
    """The counters of ``ip``'s reservations that count at ``now``, in :func:`_held_slots`' order."""
    return [_held_key(ip, slot) for slot in _held_slots(now)]


def _daily_counts(ip: str, now: float) -> tuple[int, dict[int, int]]:
    """What ``ip``'s network spent today, and what its reservations that count at ``now`` hold, by slot."""
    slots = _held_slots(now)
    keys = {_held_key(ip, slot): slot for slot in slots}
    spent_key = _daily_key(ip, now)
    values = caches[app_settings.CACHE_ALIAS].get_many([spent_key, *keys])
    held = {slot: int(values.get(key, 0)) for key, slot in keys.items()}
    return int(values.get(spent_key, 0)), held


def _holds_end(spent: int, held: dict[int, int], budget: int) -> int | None:
    """When a daily ``budget`` that ``spent`` tokens leave room in, but reservations (``held``, by slot) fill, has
    room again should none of them be given back: the end of the first slots whose reservations, once they stop
    counting, leave the rest below it (a Unix time). None when the budget is not full, or ``spent`` alone fills it
    (until midnight)."""
    left = sum(held.values())
    if spent >= budget or spent + left < budget:
        return None
    for slot in sorted(held):  # a slot's reservations stop counting two slots after it starts, in slot order
        left -= held[slot]
        if spent + left < budget:
            return (slot + 2) * RESERVATION_SLOT_SECONDS
    return None  # not reached: with no reservation left, what was spent is below the budget


def daily_tokens_used(ip: str, now: float | None = None) -> int:
    """What ``ip``'s network spent today, and what its answers being written hold."""
    spent, held = _daily_counts(ip, time.time() if now is None else now)
    return spent + sum(held.values())


#: The scope of the count of one client network's verified agents (:func:`count_did_network`).
DID_NETWORK = "did_network"
#: The scope of the daily token budget's :class:`Usage`.
DAILY_TOKENS = "daily_tokens"


def daily_usage(ip: str, now: float | None = None) -> Usage | None:
    """``ip``'s network's daily token budget as a counter, spent (``exceeded``) when :func:`reserve_tokens` would
    refuse an answer (None: no budget). It resets at midnight, or, when only reservations of answers being written
    fill it, when they stop counting (:func:`_holds_end`): the wait :func:`reserve_tokens` refuses with."""
    budget = app_settings.DAILY_TOKEN_BUDGET_PER_IP
    if not budget:
        return None
    now = time.time() if now is None else now
    spent, held = _daily_counts(ip, now)
    used = spent + sum(held.values())
    reset = _holds_end(spent, held, budget) or int(now) + seconds_until_tomorrow(now)
    return Usage(DAILY_TOKENS, budget, max(0, budget - used), reset, 86400, used >= budget)


def add_daily_tokens(ip: str, tokens: int) -> None:
    if tokens <= 0:
        return
    _add(_daily_key(ip, time.time()), tokens, DAILY_TTL)


def _add(key: str, tokens: int, ttl: int) -> int:
    """Add ``tokens`` to the counter ``key`` with the cache's incr (atomic in Redis, Memcached and the local-memory
    cache); its new value."""
    cache = caches[app_settings.CACHE_ALIAS]
    cache.add(key, 0, ttl)
    try:
        value = cache.incr(key, tokens)
    except ValueError:  # expired between add and incr
        cache.set(key, tokens, ttl)
        return tokens
    _keep(cache, key, ttl)
    return value


def _keep(cache: BaseCache, key: str, ttl: int) -> None:
    """Give ``key`` its own lifetime again after an increment or decrement: the generic incr (the database and file
    caches) is a get and a set, and the set gives the counter the cache's default timeout, so the day's counter
    would expire minutes after its last answer. (Nor is it atomic: check W008 says so.)"""
    if type(cache).incr is BaseCache.incr:
        cache.touch(key, ttl)


def _take_back(key: str, tokens: int) -> None:
    """Subtract a reservation's ``tokens`` from its slot's counter, unless the counter has expired (with them)."""
    cache = caches[app_settings.CACHE_ALIAS]
    with contextlib.suppress(ValueError):
        cache.decr(key, tokens)
        _keep(cache, key, HELD_TTL)


@dataclass
class TokenReservation:
    """Tokens held for one answer on its session's row and its client network's daily budget, until
    :meth:`release` (what the answer spent is counted as before: the turn's tokens, ``add_daily_tokens``)."""

    tokens: int = 0
    session_id: str | None = None  # the session row the tokens are held on (None: none, or a new session)
    held_key: str | None = None  # the counter of the slot they are held in on the daily budget

    def release(self) -> None:
        """Give the tokens back (once; nothing to do for a reservation of nothing)."""
        if self.session_id is not None:
            ConverseSession.objects.filter(pk=self.session_id).update(tokens_used=F("tokens_used") - self.tokens)
            self.session_id = None
        if self.held_key is not None:
            _take_back(self.held_key, self.tokens)
            self.held_key = None


def reserve_tokens(
    session: ConverseSession,
    session_budget: int,
    network: str,
    daily_budget: int,
    tokens: int,
    *,
    now: float | None = None,
) -> TokenReservation:
    """Reserve ``tokens`` (the most an answer may write: its ``max_tokens``) for one answer of ``session``, or raise
    :class:`~.errors.RateLimited` when the session's budget or ``network``'s daily budget is spent (0: none).

    An answer may start while a budget is not spent, as before; the reservation counts it as spent meanwhile, in one
    atomic step on each counter (a conditional UPDATE of the session's row, the cache's incr), so requests sent at
    once cannot all find the same last tokens left: one starts, the others are refused, as they would be one after
    the other. The caller records what the answer spent as before, and releases the reservation when it is done
    (whether it answered or failed): the tokens are held only while it answers, and on the daily budget for two
    :data:`RESERVATION_SLOT_SECONDS` at most (``now``: the Unix time it is made at).
    """
    reservation = TokenReservation(tokens=tokens)
    if session_budget:
        if session._state.adding:  # a new session: nobody else can see it yet
            exhausted = session.tokens_used >= session_budget
        else:
            held = ConverseSession.objects.filter(pk=session.pk, tokens_used__lt=session_budget).update(
                tokens_used=F("tokens_used") + tokens
            )
            exhausted = not held and ConverseSession.objects.filter(pk=session.pk).exists()
            reservation.session_id = session.pk if held else None
        if exhausted:
            raise errors.RateLimited(
                "Token budget for this session has been exhausted.", scope="session_tokens", retry_after=None
            )
    if daily_budget:
        now = time.time() if now is None else now
        key, *neighbours = _held_keys(network, now)
        # The slot's own counter first, then the others: of two reservations made at once, in two slots, at least
        # one sees the other (in one slot, the incr orders them).
        held = _add(key, tokens, HELD_TTL)
        spent_key = _daily_key(network, now)
        others = caches[app_settings.CACHE_ALIAS].get_many([spent_key, *neighbours])
        spent = int(others.pop(spent_key, 0))
        if held - tokens + spent + sum(int(value) for value in others.values()) >= daily_budget:
            _take_back(key, tokens)
            reservation.release()
            raise _daily_refusal(network, now, daily_budget, spent, held - tokens, others)
        reservation.held_key = key
    return reservation


def _daily_refusal(
    network: str, now: float, budget: int, spent: int, own: int, neighbours: dict[str, int]
) -> errors.RateLimited:
    """The 429 of a daily budget :func:`reserve_tokens` found full with ``spent`` tokens spent today, ``own`` held
    in its slot and ``neighbours`` (by key) in the others. Held by answers being written, it is not exhausted:
    the agent may retry once they are done, and at the latest when their reservations stop counting, in minutes
    (told to come back tomorrow, it would stay away for the day)."""
    own_slot, *slots = _held_slots(now)
    held = {own_slot: own, **{slot: int(neighbours.get(_held_key(network, slot), 0)) for slot in slots}}
    end = _holds_end(spent, held, budget)
    if end is None:
        return errors.RateLimited(
            "Daily token budget for this IP address is exhausted.", scope="ip", retry_after=seconds_until_tomorrow(now)
        )
    return errors.RateLimited(
        "Daily token budget for this IP address is held by answers in progress; retry when they are done.",
        scope="ip",
        retry_after=max(1, end - int(now)),
    )
