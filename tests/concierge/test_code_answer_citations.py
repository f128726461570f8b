"""A code answer's brackets ("[1, 2]", "[0]") are code, not citations."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.ahp.test_converse import ask, llm_settings
from tests.concierge.test_model_replies import QUESTION

pytestmark = pytest.mark.django_db


CODE_ANSWER = (
    "Time each steep with a list of minutes [1]:\n\n"
    "```python\nsteeps = [1, 2]\nfirst = steeps[0]\nsecond = steeps[01]\n```\n\n"
    "or inline: `pick([1, 2])[0]` [1]."
)


def test_a_code_answer_keeps_its_list_literals_and_indexes(client, demo_content, shaped_openai):
    """Brackets in code are code: "[1, 2]" was rewritten "[1][2]" (or dropped when a number named no source) and
    "[0]" was dropped as a citation of no source, so the code the agent received no longer ran."""
    shaped_openai.reply = lambda request: CODE_ANSWER
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        response, body = ask(client, QUESTION, context={"max_tokens": 300})
    assert response.status_code == 200, body
    answer = body["response"]["answer"]
    assert "steeps = [1, 2]\nfirst = steeps[0]\nsecond = steeps[01]\n" in answer, answer
    assert "`pick([1, 2])[0]`" in answer, answer
    assert answer.startswith("Time each steep with a list of minutes [1]:"), answer
    assert answer.endswith("[1]."), answer
