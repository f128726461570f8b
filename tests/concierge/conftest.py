from __future__ import annotations

import pytest


@pytest.fixture
def capability_keeping_inputs(registries):
    """``declare(answer, **declaration)``: a capability, declared as ``agent_handshake.capability(**declaration)``
    (in the registries restored after the test), whose handler keeps each input it is given and answers ``answer``.
    It returns the list the inputs are kept in."""
    import agent_handshake

    def declare(answer: dict, **declaration) -> list[dict]:
        kept: list[dict] = []

        def handler(invocation):
            kept.append(invocation.input)
            return dict(answer)

        agent_handshake.capability(**declaration)(handler)
        return kept

    return declare
