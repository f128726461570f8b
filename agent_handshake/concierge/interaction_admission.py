"""A signed message's admission to its interaction (IntentWeb's ``POST /intent``), in one round trip.

A message is admitted in the transaction of the work it does (a refused one changes nothing, and spends nothing):

- its nonce is spent, unless it was before (a replay);
- the public keys an operator registered (``TrustedActorKey`` in the admin) for the actors of its chain are read,
  for every message, not cached, so a key an operator adds, changes or deactivates applies to the next message in
  every process;
- its interaction's row is locked until the message's work is committed (concurrent messages of one interaction
  take turns), or there is none yet.

The front door verifies the signatures with those keys and refuses a replay; :func:`screen` gives the same answers
read-only, for the door to refuse a replayed or forged message before a slow step that comes before its transaction
(resolving its callback URL's host).
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router, transaction
from django.utils import timezone

from ..conf import app_settings
from ..models import IntentNonce, Interaction, TrustedActorKey

#: A message's admission, one statement in its transaction: its nonce spent unless it was before (``admit_fresh``);
#: the registered public keys of the actors of its chain (``admit_keys``); and its interaction's row, locked, or NULLs
#: if there is none. Raw SQL because the ORM puts no INSERT in a WITH clause; ON CONFLICT DO NOTHING rather than an
#: IntegrityError, which would need a savepoint to recover from.
ADMIT = """
    WITH spent AS (
        INSERT INTO {nonces} ({nonce}, {created_at}) VALUES (%s, %s) ON CONFLICT ({nonce}) DO NOTHING RETURNING 1
    )
    SELECT interaction.*, EXISTS (SELECT 1 FROM spent) AS admit_fresh,
        ARRAY(SELECT ARRAY[{actor_id}, {public_key}] FROM {keys} WHERE {active} AND {actor_id} = ANY(%s)) AS admit_keys
    FROM (SELECT 1) AS message
    LEFT JOIN LATERAL (SELECT * FROM {interactions} WHERE {interaction_id} = %s FOR UPDATE) AS interaction ON true
"""
#: :data:`ADMIT`'s checks, read-only (:func:`screen`): whether the nonce was spent, and the chain's actors' keys.
SCREEN = """
    SELECT EXISTS (SELECT 1 FROM {nonces} WHERE {nonce} = %s),
        ARRAY(SELECT ARRAY[{actor_id}, {public_key}] FROM {keys} WHERE {active} AND {actor_id} = ANY(%s))
"""


def database() -> str:
    """The database alias a message's transaction and its admission use: where the ORM writes interactions, nonces
    and actor keys. A router that puts them on different databases is refused (the nonce, the keys and the lock
    must be in one transaction)."""
    aliases = {router.db_for_write(model) for model in (Interaction, IntentNonce, TrustedActorKey)}
    if len(aliases) != 1:
        raise ImproperlyConfigured(
            "IntentWeb needs Interaction, IntentNonce and TrustedActorKey on one database; the routers give "
            f"{sorted(aliases)}."
        )
    return aliases.pop()


def admit_sql(alias: str, statement: str = ADMIT) -> str:
    """``statement`` (:data:`ADMIT`, :data:`SCREEN`) with the models' quoted table and column names on ``alias``."""
    quote = connections[alias].ops.quote_name

    def column(model: type, name: str) -> str:
        return quote(model._meta.get_field(name).column)

    return statement.format(
        nonces=quote(IntentNonce._meta.db_table),
        nonce=column(IntentNonce, "nonce"),
        created_at=column(IntentNonce, "created_at"),
        keys=quote(TrustedActorKey._meta.db_table),
        actor_id=column(TrustedActorKey, "actor_id"),
        public_key=column(TrustedActorKey, "public_key"),
        active=column(TrustedActorKey, "active"),
        interactions=quote(Interaction._meta.db_table),
        interaction_id=column(Interaction, "interaction_id"),
    )


@dataclass
class Admitted:
    #: Whether the nonce was new (and is now spent): False for a replay, which the caller refuses.
    fresh: bool
    #: actor_id -> the base64url public key an operator registered for it, for the actors asked about.
    keys: dict[str, str]
    #: The message's interaction, locked; None if its interaction_id has none.
    interaction: Interaction | None


def admit(nonce: str, actors: list[str], interaction_id: str, alias: str) -> Admitted:
    """Spend ``nonce``, read the registered keys of ``actors`` and lock the interaction ``interaction_id``, in the
    message's transaction on ``alias`` (:func:`database`); a refusal of the caller's rolls all of it back."""
    params = [nonce, timezone.now(), actors, interaction_id]
    # A RawQuerySet runs its statement once, when it is iterated (its columns are read from that cursor).
    (row,) = Interaction.objects.raw(admit_sql(alias), params, using=alias)
    if row.admit_fresh and random.random() < 0.02:
        # Now and then, once a message is committed, forget the nonces past the skew window (a refused message
        # rolls this back with the rest).
        transaction.on_commit(forget_old_nonces, using=alias)
    return Admitted(row.admit_fresh, dict(row.admit_keys), row if row.pk is not None else None)


@dataclass
class Screened:
    #: Whether the nonce was spent already (a replay).
    spent: bool
    #: As :attr:`Admitted.keys`.
    keys: dict[str, str]


def screen(nonce: str, actors: list[str], alias: str) -> Screened:
    """:func:`admit`'s answers, read-only and outside the message's transaction: :func:`admit` still decides, in the
    transaction (a nonce spent meanwhile is a replay there)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(admit_sql(alias, SCREEN), [nonce, actors])
        spent, keys = cursor.fetchone()
    return Screened(spent, dict(keys))


def forget_old_nonces() -> None:
    """Delete the nonces older than twice the skew window (no message that old is accepted), outside any message's
    transaction: it holds no message's locks."""
    cutoff = timezone.now() - datetime.timedelta(seconds=2 * app_settings.INTENT_MAX_SKEW)
    IntentNonce.forget_before(cutoff)
