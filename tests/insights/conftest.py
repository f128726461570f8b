from __future__ import annotations

import pytest


@pytest.fixture
def empty_buffer():
    """No record left over from another test (requests elsewhere record too, and nothing there writes them)."""
    from agent_handshake.insights import recording

    recording.discard()
    yield
    recording.discard()
