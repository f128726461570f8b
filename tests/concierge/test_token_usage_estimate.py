"""Token budgets with a model server that reports no ``usage`` (many OpenAI-compatible servers omit it): through
POST /agent/converse with the real ``openai`` client against the tests' fake server, an answer is charged an
estimate to the session's and the network's budgets, not 0 tokens."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.test import override_settings

from agent_handshake.models import ConverseSession
from tests.ahp.test_converse import ask, llm_settings

pytestmark = pytest.mark.django_db

QUESTIONS = ["How is gyokuro grown?", "How do I brew sencha?"]
REPLY = "Gyokuro is shaded for about three weeks before harvest [1]."


def without_usage(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "usage"}


def prompt_characters(request: dict[str, Any]) -> int:
    return sum(len(message["content"]) for message in request["messages"])


def test_an_answer_without_usage_is_charged_an_estimate(client, demo_content, shaped_openai):
    shaped_openai.reply = lambda request: REPLY
    shaped_openai.shape = without_usage
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        response, body = ask(client, QUESTIONS[0])
    assert response.status_code == 200, body
    assert body["response"]["answer"] == REPLY
    # At least a token per four characters of what the model read and wrote.
    estimate = math.ceil((prompt_characters(shaped_openai.chat_requests()[-1]) + len(REPLY)) / 4)
    assert body["meta"]["tokens_used"] >= estimate
    assert ConverseSession.objects.get(pk=body["session_id"]).tokens_used == body["meta"]["tokens_used"]


def test_answers_without_usage_spend_the_daily_token_budget(client, demo_content, shaped_openai):
    shaped_openai.reply = lambda request: REPLY
    shaped_openai.shape = without_usage
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai, DAILY_TOKEN_BUDGET_PER_IP=100)):
        assert ask(client, QUESTIONS[0])[1]["status"] == "success"
        response, body = ask(client, QUESTIONS[1])
    assert response.status_code == 429, body
    assert body["scope"] == "ip"
    assert len(shaped_openai.chat_requests()) == 1


def test_answers_without_usage_spend_the_sessions_token_budget(client, demo_content, shaped_openai):
    shaped_openai.reply = lambda request: REPLY
    shaped_openai.shape = without_usage
    limits = {"unauthenticated": {"requests": "100/minute", "token_budget": "100/session"}}
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai, RATE_LIMITS=limits)):
        _, first = ask(client, QUESTIONS[0])
        assert first["status"] == "success"
        response, body = ask(client, QUESTIONS[1], session_id=first["session_id"])
    assert response.status_code == 429, body
    assert (body["scope"], body["retry_after"]) == ("session_tokens", None)


def test_usage_without_a_completion_count_charges_the_reply_too(client, demo_content, shaped_openai):
    """``usage`` with only ``prompt_tokens``: the reply the model wrote is estimated, not free."""
    long_reply = "Gyokuro is shaded for about three weeks before harvest [1]. " * 6
    shaped_openai.reply = lambda request: long_reply.strip()
    shaped_openai.shape = lambda body: {**body, "usage": {"prompt_tokens": 3}}
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai, MAX_ANSWER_TOKENS=400)):
        _, body = ask(client, QUESTIONS[0], context={"max_tokens": 400})
    assert body["meta"]["tokens_used"] >= 3 + math.ceil(len(long_reply.strip()) / 4)
