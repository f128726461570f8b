"""Rows kept for a while and then forgotten, oldest first."""

from __future__ import annotations

import datetime

from django.db import models


class Forgettable(models.Model):
    """A row that matters for a time after it is written (a spent nonce, an idempotent response), then is deleted
    by age: :meth:`forget_before`, in batches so a purge never holds a long transaction."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        abstract = True

    @classmethod
    def forget_before(cls, cutoff: datetime.datetime, *, limit: int | None = None) -> int:
        """Delete the rows written before ``cutoff``, the oldest ``limit`` at most (all when None); how many."""
        old = cls._default_manager.filter(created_at__lt=cutoff)
        if limit is not None:
            old = cls._default_manager.filter(pk__in=old.order_by("created_at").values("pk")[:limit])
        return old.delete()[0]
