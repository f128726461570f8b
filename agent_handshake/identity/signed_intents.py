"""Signed intents (the Agent Semantic Protocol's ``IntentMessage``): the verified agent that signs one, and the
replay cache that lets each be answered at most once.

The cache is :class:`~agent_handshake.models.SeenSignature`, which every signed request shares (each kind under a
key of its own domain), kept for twice the skew window: an older copy is refused for its timestamp anyway.
"""

from __future__ import annotations

import contextlib

from django.db import DatabaseError

from ..models import SeenSignature, VerifiedAgent


def signer(did: str) -> VerifiedAgent | None:
    """The verified agent of ``did`` (its key and client read with it), or None: no handshake completed it."""
    return VerifiedAgent.objects.select_related("key__client").filter(did=did).first()


def seen(key: str) -> bool:
    """Whether the intent kept under ``key`` was answered (or is being answered) already."""
    return SeenSignature.objects.filter(pk=key).exists()


def spend(key: str) -> bool:
    """Mark the intent kept under ``key`` as answered; False if it was already (a replay, or a copy sent at the same
    time that was taken first)."""
    return SeenSignature.spend(key)


def give_back(key: str) -> None:
    """Forget that the intent kept under ``key`` was answered: its answer was refused or failed, and it may be sent
    again unchanged. If the database is what failed, it stays spent: refused as a replay, never answered twice."""
    with contextlib.suppress(DatabaseError):
        SeenSignature.objects.filter(pk=key).delete()
