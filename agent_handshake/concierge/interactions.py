"""IntentWeb's interactions, stored: one row per interaction, changed turn by turn.

The front door leads the interaction (:mod:`agent_handshake.intentweb.flows`: what each message means and what to
answer; what to ask next is :mod:`.slot_filling`'s) on an :class:`~agent_handshake.models.Interaction` it gets from
here: locked by its message's admission (:mod:`.interaction_admission`), or new. Here it is created (one per
``interaction_id``, whichever concurrent message comes first), saved after each turn, found again for its ``async``
job's callback, and the answer to a turn that ended it without a call is kept for the retry of that turn.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from ..models import IdempotencyRecord, Interaction, Job
from . import calls, errors

#: An interaction's statuses (collecting, clarifying, waiting, done, failed, closed).
InteractionStatus = Interaction.Status

#: What a turn may change on a stored interaction: a save writes these alone (the others are fixed when its first
#: message creates it), which spares the ORM preparing and sending the rest.
TURN_FIELDS = [
    "status",
    "capability",
    "candidates",
    "collected",
    "asked",
    "confidence",
    "job",
    "external_id",
    "turns",
    "updated_at",
]


def new(**fields: Any) -> Interaction:
    """An interaction not stored yet (:func:`create` stores it)."""
    return Interaction(**fields)


def create(interaction: Interaction) -> bool:
    """Store the new ``interaction``; False when its ``interaction_id`` is taken (another request may be starting
    the same one right now). A savepoint of its own: the caller's transaction stays usable."""
    try:
        with transaction.atomic():
            interaction.save()
    except IntegrityError:
        return False
    return True


def save_turn(interaction: Interaction) -> None:
    """Store what a turn changed (:data:`TURN_FIELDS`)."""
    interaction.save(update_fields=TURN_FIELDS)


def of_job(job: Job) -> Interaction | None:
    """The interaction whose ``async`` job ``job`` is (None: deleted after ``INTENT_RETENTION_SECONDS`` while the job
    waited, or its callback was retried)."""
    return Interaction.objects.filter(job=job).first()


def stored_id(reference: str) -> str:
    """``reference`` (a capability's booking number, say) as the interaction's ``external_id`` column holds it: the
    answer carries it whole, but a long one (a signed token) would fail the save after the capability ran."""
    return reference[: Interaction._meta.get_field("external_id").max_length]


def remember_answer(call: calls.Call, idempotency_key: str, status: int, body: dict[str, Any]) -> None:
    """Keep ``status`` and ``body`` as the answer to ``call``'s request under ``idempotency_key``, as a call keeps its
    own (:meth:`~.calls.Call.once`): the answer of a turn that ended its interaction without calling anything (the
    poll that found its job done), which a retry of that turn gets again (:meth:`~.calls.Call.stored`). Nothing is
    kept without an API key (idempotency is per key); a different request under the key is a
    :class:`~.errors.Conflict`."""
    if call.key is None:
        return
    if len(idempotency_key) > calls.MAX_IDEMPOTENCY_KEY:
        raise errors.InvalidInput(f"Idempotency-Key is over {calls.MAX_IDEMPOTENCY_KEY} characters.")
    fingerprint = call.fingerprint()
    record, created = IdempotencyRecord.objects.get_or_create(
        api_key=call.key,
        key=idempotency_key,
        defaults={"request_hash": fingerprint, "status_code": status, "body": body},
    )
    if not created and record.request_hash != fingerprint:
        raise errors.Conflict("This Idempotency-Key was used for a different request; use a new key for a new request.")
