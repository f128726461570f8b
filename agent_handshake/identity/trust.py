"""What a verified agent has earned: its trust score, and the tier that follows from it.

Trust starts at 0.5, goes up by ``+0.05`` for every request the site accepted and did work for (a question answered,
a capability or tool called, a page read, an intent answered) and down by ``-0.02`` for every one it refused (any 4xx:
a malformed request, a scope it lacks, a rate limit), clamped to [0, 1]; a 5xx is the site's own failure and moves
nothing. Housekeeping that does no work for anyone (MCP's ``initialize``, ``ping``, listings and notifications, its
``job_status`` poll: ``mcp/server.py``'s ``earns_trust``) moves trust only when refused: accepted, ten of them would
take a new DID to the top tier. An idempotent replay (the stored answer to a request sent again with its
``Idempotency-Key``, ``Idempotent-Replayed: true``) moves nothing, accepted or refused: the request was judged, and
rewarded or refused, once (an honest network retry is not penalised twice). :func:`record` changes it
in one statement that also writes the :class:`~agent_handshake.models.TrustEvent` history row, so concurrent requests
never lose an update. An operator may pin an agent's trust (requests no longer change it) or block the DID (every
request gets 403, and the work it queued before stops acting for it: :func:`blocked_owner`).

``DID_TRUST_TIERS`` maps trust to treatment: the first tier (highest ``min_trust`` first) whose ``min_trust`` the
agent's trust reaches gives its rate limits (a ``RATE_LIMITS`` tier's name: ``authenticated`` or
``unauthenticated``, counted per DID either way) and the scopes it may use (with the agent's own extra scopes).
The manifest publishes the tiers under ``rate_limits.verified_agents``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db import connection
from django.db.models import Exists, OuterRef
from django.utils import timezone

from ..conf import app_settings
from ..models import TrustEvent, VerifiedAgent

ACCEPTED, REFUSED = 0.05, -0.02


@dataclass(frozen=True)
class Tier:
    name: str
    min_trust: float
    rate_limits: str
    scopes: tuple[str, ...]


def tiers() -> list[Tier]:
    """``DID_TRUST_TIERS``, highest first."""
    listed = [
        Tier(t["name"], float(t["min_trust"]), t.get("rate_limits", "authenticated"), tuple(t.get("scopes", ())))
        for t in app_settings.DID_TRUST_TIERS
    ]
    return sorted(listed, key=lambda tier: -tier.min_trust)


def tier_of(trust: float) -> Tier:
    for tier in tiers():
        if trust >= tier.min_trust:
            return tier
    return Tier("untrusted", 0.0, "unauthenticated", ())


def scopes_of(agent: VerifiedAgent) -> list[str]:
    return sorted(set(tier_of(agent.trust).scopes) | set(agent.scopes or ()))


def blocked_owner(key_field: str = "api_key") -> Exists:
    """A query expression, true for a row whose API key (its field ``key_field``) is a blocked verified agent's.

    A block is read where the agent's queued work would act for it (a worker claiming its job, a callback about to
    be sent), whenever and however the block was set (the admin, ``save()``, an ``update()``): an annotation on the
    row the worker locks anyway, so it costs no extra query. Trust tiers never block."""
    return Exists(VerifiedAgent.objects.filter(key=OuterRef(key_field), blocked=True))


def change_of(trust: float, accepted: bool) -> float:
    """What :func:`record` moves an unpinned agent's ``trust`` by for one request: its step, clamped to [0, 1]."""
    return max(0.0, min(1.0, trust + (ACCEPTED if accepted else REFUSED))) - trust


def record(agent_id: int, accepted: bool, reason: str) -> None:
    """Move an unpinned agent's trust for one request (see the module docstring), with its history row."""
    delta = ACCEPTED if accepted else REFUSED
    # The reason names the request's path, which may hold a NUL (``%00``) that no text column can: the history row
    # must not turn the agent's answer into a 500.
    reason = reason.replace("\x00", "\ufffd")
    agents, events = VerifiedAgent._meta.db_table, TrustEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH moved AS (
                UPDATE {agents} SET trust = LEAST(1.0, GREATEST(0.0, trust + %s))
                WHERE id = %s AND NOT pinned
                RETURNING id, trust
            )
            INSERT INTO {events} (agent_id, delta, trust, reason, created_at)
            SELECT id, %s, trust, %s, now() FROM moved
            """,
            [delta, agent_id, delta, reason[:200]],
        )


#: How an operator's change of trust is recorded (kept however old: it is the audit trail, and rare).
BY_OPERATOR = "set by "


def forget_old_events() -> int:
    """Delete the request events older than ``DID_TRUST_HISTORY_DAYS`` (None: keep them all): a verified agent's every
    request adds one, and the trust they summed is kept on the agent. Operators' changes are kept."""
    days = app_settings.DID_TRUST_HISTORY_DAYS
    if days is None:
        return 0
    cutoff = timezone.now() - datetime.timedelta(days=days)
    old = TrustEvent.objects.filter(created_at__lt=cutoff).exclude(reason__startswith=BY_OPERATOR)
    return old.delete()[0]


def set_by_operator(agent: VerifiedAgent, trust: float, who: str) -> None:
    """An operator's new trust for ``agent`` (the admin), recorded in its history."""
    trust = max(0.0, min(1.0, trust))
    delta = trust - agent.trust
    VerifiedAgent.objects.filter(pk=agent.pk).update(trust=trust)
    TrustEvent.objects.create(agent=agent, delta=delta, trust=trust, reason=f"{BY_OPERATOR}{who}"[:200])
    agent.trust = trust
