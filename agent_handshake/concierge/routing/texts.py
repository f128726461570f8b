"""The texts a capability is routed by: what it declares of itself (its intent, its description and its examples)
and the site's own routing examples for it (:class:`~agent_handshake.models.RoutingExample`, which the operators
file in the admin), read from the database and kept in the process for ``STATE_TTL`` seconds.

The routing examples are requests, and count only as such: the site's name and the cue words are read from what the
capabilities declare (:func:`declared_texts`), never from the examples (see :func:`texts_of`).
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from ...conf import app_settings
from ...models import RoutingExample
from ...registry import Capability

logger = logging.getLogger(__name__)


def declared_texts(capability: Capability) -> list[str]:
    """What a capability says of itself: its intent, its description and the examples it declares."""
    return [capability.intent_text, capability.description, *capability.examples]


def texts_of(capability: Capability) -> list[str]:
    """The texts a capability is routed by: :func:`declared_texts` and the site's own routing examples for it
    (:func:`site_examples`). The examples are requests, and count only as such: the site's name and the cue words are
    read from what the capabilities declare (an example naming the site, "what is lantern and kettle", would make its
    name a word the capabilities use; one filed under another capability would take a cue word away)."""
    return [*declared_texts(capability), *site_examples().get(capability.name, ())]


#: At most this many of a capability's routing examples are used, the newest: each is a vector to compute once per
#: deployment, and a capability's fit is its nearest texts', which a few dozen good examples settle.
SITE_EXAMPLES_PER_CAPABILITY = 200
_site_examples: tuple[float, dict[str, tuple[str, ...]]] | None = None
_site_examples_lock = threading.Lock()
#: Counts :func:`forget_site_examples` calls: examples read while one was made (a save committing meanwhile) are used
#: for that request only, not kept for ``STATE_TTL``.
_site_examples_generation = 0


def site_examples() -> dict[str, tuple[str, ...]]:
    """The site's routing examples (:class:`~agent_handshake.models.RoutingExample`) by capability name, oldest
    first, at most :data:`SITE_EXAMPLES_PER_CAPABILITY` each. A process reads them again after ``STATE_TTL``
    seconds, as it does the content's state, and at once after a save or delete it made (:func:`forget_site_examples`,
    on commit); a name no capability has is read and never used."""
    global _site_examples
    current = _site_examples
    if current is not None and time.monotonic() - current[0] < app_settings.STATE_TTL:
        return current[1]
    with _site_examples_lock:
        current = _site_examples
        if current is not None and time.monotonic() - current[0] < app_settings.STATE_TTL:
            return current[1]
        read_at, generation = time.monotonic(), _site_examples_generation
        newest = (
            RoutingExample.objects.annotate(
                place=Window(RowNumber(), partition_by=[F("capability")], order_by=F("pk").desc())
            )
            .filter(place__lte=SITE_EXAMPLES_PER_CAPABILITY)
            .order_by("capability", "pk")
            .values_list("capability", "text")
        )
        found: dict[str, list[str]] = {}
        try:
            with transaction.atomic():  # a savepoint: a failed read leaves the request's own transaction usable
                for name, text in newest:
                    found.setdefault(name, []).append(text)
        except DatabaseError:
            # The table missing (code deployed before `migrate`) or the database refusing: route by what the
            # capabilities declare, and look again after STATE_TTL rather than on every request.
            logger.exception("The routing examples could not be read; routing without them")
            found = {}
        examples = {name: tuple(texts) for name, texts in found.items()}
        if generation == _site_examples_generation:
            _site_examples = (read_at, examples)
        return examples


def forget_site_examples() -> None:
    """Read the routing examples again on the next request (after one was saved or deleted)."""
    global _site_examples, _site_examples_generation
    _site_examples_generation += 1
    _site_examples = None
