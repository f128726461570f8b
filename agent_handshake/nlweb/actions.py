"""NLWeb ``actions[]`` (§7): the MODE3 capabilities that apply to a result, ready to post.

A capability declares the content it acts on (``applies_to={"shop.Product": lambda product: {...}}``, see
:func:`agent_handshake.capability`); every result of that model then lists it as an action whose ``params`` are
the whole ``/ask`` body that invokes it for that object: ``{"query": {"text", "capability", "input"}}``, the
input prefilled (and valid against the capability's ``input_schema``; an object whose prefilled input is not
valid gets no action: :mod:`agent_handshake.concierge.object_actions` finds them). Actions that need credentials
say so (``"authentication": "required"`` and the scope).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..concierge.object_actions import applicable
from ..registry import Capability
from .schema_org import CONTEXT, text

if TYPE_CHECKING:
    from ..models import Document


def action_type(capability: Capability) -> str:
    if capability.action_schema_type:
        return capability.action_schema_type
    return "CheckAction" if capability.action_type == "query" else "Action"


def actions_for(documents: list[Document], endpoint: str) -> dict[int, list[dict[str, Any]]]:
    """Document pk -> the actions for its object, for every document a capability applies to."""
    actions: dict[int, list[dict[str, Any]]] = {}
    for pk, found in applicable(documents).items():
        actions[pk] = []
        for each in found:
            capability = each.capability
            action: dict[str, Any] = {
                "@context": CONTEXT,
                "@type": action_type(capability),
                "name": capability.name,
                "description": capability.description,
                "protocol": "HTTP",
                "method": "POST",
                "endpoint": endpoint,
                "params": {"query": {"text": f"{capability.name} for {text(str(each.target), 200)}",
                                     "capability": capability.name, "input": each.input}},
            }  # fmt: skip
            if capability.requires_auth:
                action["authentication"] = "required"
                action["scope"] = capability.scope
            actions[pk].append(action)
    return actions
