"""NLWeb ``actions[]`` (§7): the MODE3 capabilities that apply to a result, ready to post.

A capability declares the content it acts on (``applies_to={"shop.Product": lambda product: {...}}``, see
:func:`agent_handshake.capability`); every result of that model then lists it as an action whose ``params`` are
the whole ``/ask`` body that invokes it for that object: ``{"query": {"text", "capability", "input"}}``, the
input prefilled (and valid against the capability's ``input_schema``; an object whose prefilled input is not
valid gets no action). Actions that need credentials say so (``"authentication": "required"`` and the scope).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django.contrib.contenttypes.models import ContentType

from ..concierge.invocation import check_input
from ..models import Document
from ..registry import Capability, capability_registry
from .schema_org import CONTEXT, text

logger = logging.getLogger(__name__)


def action_type(capability: Capability) -> str:
    if capability.action_schema_type:
        return capability.action_schema_type
    return "CheckAction" if capability.action_type == "query" else "Action"


def _objects(documents: list[Document], labels: set[str]) -> dict[int, Any]:
    """Document pk -> its source object, for the documents of ``labels``: one query per model."""
    wanted: dict[int, list[Document]] = defaultdict(list)
    for document in documents:
        wanted[document.content_type_id].append(document)
    found: dict[int, Any] = {}
    for content_type_id, group in wanted.items():
        model = ContentType.objects.get_for_id(content_type_id).model_class()
        if model is None or model._meta.label_lower not in labels:
            continue
        objects = model._default_manager.in_bulk([document.object_id for document in group])
        by_key = {str(key): value for key, value in objects.items()}
        for document in group:
            if (obj := by_key.get(document.object_id)) is not None:
                found[document.pk] = obj
    return found


def actions_for(documents: list[Document], endpoint: str) -> dict[int, list[dict[str, Any]]]:
    """Document pk -> the actions for its object, for every document a capability applies to."""
    capabilities = [c for c in capability_registry.available() if c.applies_to and c.handler is not None]
    if not capabilities or not documents:
        return {}
    objects = _objects(documents, {label for c in capabilities for label in c.applies_to})
    actions: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for pk, obj in objects.items():
        for capability in capabilities:
            prefill = capability.applies_to.get(obj._meta.label_lower)
            if prefill is None:
                continue
            try:
                data = prefill(obj)
            except Exception:  # the site's own function: one object's failure costs that action, not the answer
                logger.exception("applies_to of %s failed for %r", capability.name, obj)
                continue
            if not isinstance(data, dict) or check_input(capability, data) is not None:
                continue
            action: dict[str, Any] = {
                "@context": CONTEXT,
                "@type": action_type(capability),
                "name": capability.name,
                "description": capability.description,
                "protocol": "HTTP",
                "method": "POST",
                "endpoint": endpoint,
                "params": {"query": {"text": f"{capability.name} for {text(str(obj), 200)}",
                                     "capability": capability.name, "input": data}},
            }  # fmt: skip
            if capability.requires_auth:
                action["authentication"] = "required"
                action["scope"] = capability.scope
            actions[pk].append(action)
    return dict(actions)
