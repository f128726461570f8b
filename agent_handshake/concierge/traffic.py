"""What a front door tells the traffic insights itself (:mod:`agent_handshake.insights.recording`).

The concierge notes what it decides: the capability a call or a question is for, and its outcome. A front door
notes only what it decides in its own protocol's terms: an error it answers with a 200 status (a JSON-RPC error, an
MCP tool error, NLWeb's Failure of a job), which the status alone would record as a success, and the
clarifications of a conversation it leads itself (IntentWeb's questions). Each does nothing where no request is
being recorded.
"""

from __future__ import annotations

from ..insights import recording
from . import errors


def note_error() -> None:
    """The request failed, though its status says success: its protocol answers the error in a 200 body."""
    recording.note(outcome=recording.Outcome.ERROR)


def note_refusal(error: errors.ConciergeError) -> None:
    """``error`` was answered with a 200 status: recorded as the status it carries says (401 and 403 refused, 429
    rate limited, else an error)."""
    recording.note(outcome=recording.outcome_of_status(error.status))


def note_clarification(capability: str | None = None) -> None:
    """The site asked a question back (which capability, or the input ``capability`` still needs)."""
    recording.note(capability=capability, outcome=recording.Outcome.CLARIFICATION)


def note_capability(name: str) -> None:
    """The request is about capability ``name``, whatever its outcome."""
    recording.note(capability=name)
