from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ...concierge.conversation import delete_expired_interactions, delete_expired_sessions
from ...concierge.input_pool import forget_expired, update_all
from ...identity.trust import forget_old_events


class Command(BaseCommand):
    help = (
        "Delete converse sessions idle for longer than SESSION_IDLE_SECONDS, and IntentWeb interactions idle for "
        "longer than INTENT_RETENTION_SECONDS, schema template fragments older than SCHEMA_POOL_RETENTION_SECONDS, "
        "and verified agents' request events older than DID_TRUST_HISTORY_DAYS; "
        "cluster the fragments no pool update took yet (also a Celery task for beat)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = delete_expired_sessions()
        interactions, _ = delete_expired_interactions()
        self.stdout.write(f"Deleted {deleted} expired session{'s' if deleted != 1 else ''}.")
        self.stdout.write(f"Deleted {interactions} expired interaction{'s' if interactions != 1 else ''}.")
        events = forget_old_events()
        self.stdout.write(f"Deleted {events} old trust event{'s' if events != 1 else ''}.")
        fragments = forget_expired()
        self.stdout.write(f"Deleted {fragments} expired input fragment{'s' if fragments != 1 else ''}.")
        proposed = update_all()
        self.stdout.write(f"Proposed {proposed} new input key{'s' if proposed != 1 else ''}.")
