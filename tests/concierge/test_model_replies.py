"""What an OpenAI-compatible server really sends back, through POST /agent/converse with the real ``openai`` client:
replies that are not one plain string, replies the server cut off (``finish_reason`` "length" or
"content_filter"), and a server that is slow or rate-limits us (a 429 with Retry-After)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from tests.ahp.test_converse import ask, llm_settings
from tests.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db

QUESTION = "Why is gyokuro shaded before harvest?"


def with_message(message: Any):
    return lambda body: {**body, "choices": [{**body["choices"][0], "message": message}]}


def finishing(reason: str):
    def shape(body: dict[str, Any]) -> dict[str, Any]:
        body["choices"][0]["finish_reason"] = reason
        return body

    return shape


# A reply whose message is not one string of text.

MISTRAL_PARTS = [
    {"type": "thinking", "thinking": [{"type": "text", "text": "The user wants the reason. Secret plan."}]},
    {"type": "text", "text": "Gyokuro is shaded for about three weeks before harvest [1]."},
]


def test_a_reply_in_content_parts_is_read_as_its_text_parts(client, demo_content, shaped_openai):
    """Mistral's reasoning models (and some proxies) send ``content`` as a list of parts: the answer is its text
    parts (the model's thinking is not served), not a 500."""
    shaped_openai.reply = lambda request: MISTRAL_PARTS
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        response, body = ask(client, QUESTION)
    assert response.status_code == 200, body
    assert body["response"]["answer"] == "Gyokuro is shaded for about three weeks before harvest [1]."
    assert "guardrail" not in body["meta"]


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(with_message(None), id="message-null"),
        pytest.param(lambda body: {**body, "choices": [{"index": 0, "finish_reason": "stop"}]}, id="no-message"),
        pytest.param(with_message({"role": "assistant", "content": 12345}), id="content-number"),
        pytest.param(with_message({"role": "assistant", "content": {"text": "x"}}), id="content-object"),
        pytest.param(lambda body: {**body, "usage": {"prompt_tokens": 3}}, id="usage-without-total"),
    ],
)
def test_a_malformed_reply_is_answered_extractively_not_a_server_error(client, demo_content, shaped_openai, shape):
    shaped_openai.shape = shape
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        response, body = ask(client, QUESTION)
    assert response.status_code == 200, body
    assert body["status"] == "success"
    assert body["response"]["answer"]
    assert isinstance(body["meta"]["tokens_used"], int)


# A reply the server cut off is not served as if the model had finished it.


def test_a_reply_cut_off_at_max_tokens_keeps_only_its_finished_sentences(client, demo_content, shaped_openai):
    """``finish_reason: "length"``: the model ran out of tokens mid-sentence ("Never steep it above ..." says the
    opposite of what it was going to); the answer ends with its last finished sentence."""
    shaped_openai.reply = lambda request: "Gyokuro is shaded for three weeks before harvest [1]. Never steep it above"
    shaped_openai.shape = finishing("length")
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        _, body = ask(client, QUESTION)
    assert body["response"]["answer"] == "Gyokuro is shaded for three weeks before harvest [1]."


def test_a_list_cut_off_at_max_tokens_keeps_its_finished_items(client, demo_content, shaped_openai):
    shaped_openai.reply = lambda request: "- Shade the bushes for three weeks [1]\n- Pick the youngest lea"
    shaped_openai.shape = finishing("length")
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        _, body = ask(client, QUESTION)
    assert body["response"]["answer"] == "- Shade the bushes for three weeks [1]"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Gyokuro is shaded for about", "length"),  # not one sentence finished
        ("Gyokuro is shaded [1]. Then the farmer tells you to", "content_filter"),  # the provider's filter stopped it
    ],
)
def test_a_reply_with_nothing_finished_or_filtered_is_replaced(client, demo_content, shaped_openai, reply, reason):
    shaped_openai.reply = lambda request: reply
    shaped_openai.shape = finishing(reason)
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        _, body = ask(client, QUESTION)
    assert body["status"] == "success"
    assert body["meta"]["guardrail"] == "output_blocked"
    assert "Gyokuro is shaded" not in body["response"]["answer"]
    assert body["response"]["answer"]  # the extractive answer


# Retries within the timeout: ``timeout`` bounds the call, retries included, and a 429's Retry-After is waited out
# only when the retry fits in the time left.


def patient_settings(fake: FakeOpenAI, **options: Any) -> dict[str, Any]:
    settings = llm_settings(fake)
    settings["ANSWER_OPTIONS"] = {**settings["ANSWER_OPTIONS"], "max_retries": 2, **options}
    return settings


def timed_ask(client, settings: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    with override_settings(AGENT_HANDSHAKE=settings):
        response, body = ask(client, QUESTION)
    assert response.status_code == 200, body
    return time.monotonic() - started, body


def test_a_rate_limited_model_does_not_hold_the_agent_past_the_timeout(client, demo_content, shaped_openai):
    """A model server answering 429 with ``Retry-After: 10``: the client waited the ten seconds before each of its
    retries (up to a minute each), so the agent waited 20 s for a timeout of 2; a retry that cannot fit in the
    time left is not made, and the agent gets the extractive answer at once."""
    shaped_openai.fail_next = [429, 429, 429]
    shaped_openai.fail_headers = {"Retry-After": "10"}
    elapsed, body = timed_ask(client, patient_settings(shaped_openai, timeout=2))
    assert body["meta"]["guardrail"] == "model_unavailable"
    assert elapsed < 5  # the question's own work (embedding, retrieval) included
    assert len(shaped_openai.chat_requests()) == 1


def test_a_slow_model_is_given_up_on_after_the_timeout_retries_included(client, demo_content, shaped_openai):
    shaped_openai.delay = 2.5
    elapsed, body = timed_ask(client, patient_settings(shaped_openai, timeout=1))
    assert body["meta"]["guardrail"] == "model_unavailable"
    assert elapsed < 3  # three attempts of a second each, with the waits between them, before


def test_a_failure_is_still_retried_when_the_retry_fits_in_the_timeout(client, demo_content, shaped_openai):
    shaped_openai.reply = lambda request: "Gyokuro is shaded for about three weeks before harvest [1]."
    shaped_openai.fail_next = [503, 429]
    shaped_openai.fail_headers = {"Retry-After": "0.2"}
    _, body = timed_ask(client, patient_settings(shaped_openai, timeout=10))
    assert body["response"]["answer"] == "Gyokuro is shaded for about three weeks before harvest [1]."
    assert "guardrail" not in body["meta"]
    assert len(shaped_openai.chat_requests()) == 3
