"""ANSWER_OPTIONS ``timeout: None`` (the openai client's "no timeout") with the model backend's own retries."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from tests.ahp.test_converse import ask, llm_settings
from tests.concierge.test_model_replies import QUESTION

pytestmark = pytest.mark.django_db


def options(fake: Any, **extra: Any) -> dict[str, Any]:
    settings = llm_settings(fake)
    settings["ANSWER_OPTIONS"] = {**settings["ANSWER_OPTIONS"], **extra}
    return settings


def test_a_timeout_of_none_means_no_deadline_not_a_server_error(client, demo_content, shaped_openai):
    """``timeout: None`` is the openai client's "no timeout"; the whole-call deadline added it to a clock
    (TypeError) and every question was a 500 concierge_error."""
    shaped_openai.reply = lambda request: "Gyokuro is shaded for about three weeks before harvest [1]."
    with override_settings(AGENT_HANDSHAKE=options(shaped_openai, timeout=None, max_retries=1)):
        response, body = ask(client, QUESTION)
    assert response.status_code == 200, body
    assert body["response"]["answer"] == "Gyokuro is shaded for about three weeks before harvest [1]."
    assert "guardrail" not in body["meta"]


def test_without_a_timeout_a_retry_after_over_a_minute_is_not_waited(client, demo_content, shaped_openai):
    """With no deadline to bound it, a server's Retry-After (a broken proxy's "1e9") was slept out in full, holding
    the worker thread; as the openai client does, one over a minute is not waited: the answer is extractive."""
    shaped_openai.fail_next = [429]
    shaped_openai.fail_headers = {"Retry-After": "90"}
    started = time.monotonic()
    with override_settings(AGENT_HANDSHAKE=options(shaped_openai, timeout=None, max_retries=1)):
        response, body = ask(client, QUESTION)
    assert response.status_code == 200, body
    assert body["meta"]["guardrail"] == "model_unavailable"
    assert time.monotonic() - started < 30
    assert len(shaped_openai.chat_requests()) == 1
