"""Content-type negotiation (AHP §6.6): which of the types the agent accepts a capability answers in."""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import Capability
from .errors import UnsupportedType

DEFAULT_TYPE = "text/answer"


@dataclass(frozen=True)
class Negotiated:
    content_type: str
    #: The richer type the capability would have served, when it fell back to text/answer.
    fallback_from: str | None = None


def negotiate(capability: Capability, accept_types: list[str] | None) -> Negotiated:
    """The visiting agent's most preferred type that the capability can return.

    With no overlap: ``text/answer`` (with ``fallback_from``) if the capability declares ``accept_fallback``,
    else :class:`~.errors.UnsupportedType` listing what the capability offers.
    """
    wanted = accept_types or [DEFAULT_TYPE]
    for content_type in wanted:
        if content_type in capability.response_types:
            return Negotiated(content_type)
    if capability.accept_fallback:
        return Negotiated(DEFAULT_TYPE, fallback_from=capability.response_types[0])
    raise UnsupportedType(
        f"{capability.name} cannot return any of {wanted}.", available_types=list(capability.response_types)
    )
