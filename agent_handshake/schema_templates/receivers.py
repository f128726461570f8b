"""A template's version follows what it is made of: when an editor's key text or a proposed key changes, the
template is marked stale in the same transaction (so the next read rebuilds it whatever happens after), and
published again once the change commits (:func:`.templates.publish`). The version goes up only if the published
content changed: a proposal's counters do not make a new version."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from ..models import ProposedField, SchemaKeyText, SchemaTemplate
from ..registry import capability_registry
from . import templates

logger = logging.getLogger(__name__)
#: Fields of a proposal the pool and the counters write; they are not part of any template.
BOOKKEEPING = frozenset({"centroid", "fragments", "sources", "examples", "filled", "failures", "updated_at"})


def republish(capability_name: str) -> None:
    capability = capability_registry.get(capability_name)
    if capability is None or capability.input_schema is None:
        return
    try:
        templates.publish(capability)
    except Exception:  # the row is marked stale: the next read publishes it
        logger.exception("Could not publish the schema template of %s", capability_name)


def changed(scenario: str) -> None:
    SchemaTemplate.objects.filter(scenario=scenario).update(source_digest="")
    templates.forget(scenario)
    transaction.on_commit(partial(templates.forget, scenario))
    transaction.on_commit(partial(republish, scenario))


def text_changed(sender: type, instance: SchemaKeyText, **kwargs: Any) -> None:
    scenario = SchemaTemplate.objects.filter(pk=instance.template_id).values_list("scenario", flat=True).first()
    if scenario is not None:
        changed(scenario)


def proposal_changed(sender: type, instance: ProposedField, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and set(update_fields) <= BOOKKEEPING:
        return
    changed(instance.capability)


def connect() -> None:
    for event, signal in (("saved", post_save), ("deleted", post_delete)):
        signal.connect(text_changed, sender=SchemaKeyText, dispatch_uid=f"agent_handshake.key_text_{event}")
        signal.connect(proposal_changed, sender=ProposedField, dispatch_uid=f"agent_handshake.proposal_{event}")
