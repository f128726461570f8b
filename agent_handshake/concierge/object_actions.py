"""The MODE3 capabilities that act on the objects a search found, each with its input prefilled.

A capability declares the content it acts on (``applies_to={"shop.Product": lambda product: {...}}``, see
:func:`agent_handshake.capability`): every found document of such an object may offer it, with the input that
function prefills for the object, if that input is valid against the capability's ``input_schema`` (an object whose
prefilled input is not valid does not offer it). A front door renders each as its protocol offers an action (NLWeb's
``actions[]``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..models import Document
from ..registry import Capability, capability_registry
from .documents import source_objects
from .invocation import check_input

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applicable:
    """``capability`` applies to ``target`` (a found document's object), called with ``input``."""

    capability: Capability
    target: Any
    input: dict[str, Any]


def applicable(documents: list[Document]) -> dict[int, list[Applicable]]:
    """Document pk -> the capabilities that apply to its object, for every document one applies to."""
    capabilities = [c for c in capability_registry.available() if c.applies_to and c.handler is not None]
    if not capabilities or not documents:
        return {}
    objects = source_objects(documents, {label for c in capabilities for label in c.applies_to})
    found: dict[int, list[Applicable]] = defaultdict(list)
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
            found[pk].append(Applicable(capability, obj, data))
    return dict(found)
