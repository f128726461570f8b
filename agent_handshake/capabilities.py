"""The capabilities the app itself provides, registered in the one capability registry at start-up."""

from __future__ import annotations

from typing import Any

from . import state
from .registry import Capability, capability_registry

CONTACT = "contact"


def contact_data() -> dict[str, Any]:
    """The ``application/data`` payload (Appendix C) of the ``contact`` capability."""
    snapshot = state.snapshot()
    return {"schema": "https://schema.org/ContactPoint", "data": {"name": snapshot.name, **snapshot.contact}}


def register_builtin_capabilities() -> None:
    if capability_registry.get(CONTACT) is None:
        capability_registry.register(
            Capability(
                name=CONTACT,
                description="How to reach the site owner: email, phone, postal address, contact page.",
                mode="MODE1",
                response_types=["application/data"],
                handler=contact_data,
                available=lambda: bool(state.snapshot().contact),
            )
        )
