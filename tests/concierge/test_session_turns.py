"""Turns of a POST /agent/converse session (AHP §6.5) that the session's limits must not lose: on the demo content,
with the real embedding model and PostgreSQL, and the answer model, where there is one, on the tests' fake
OpenAI-compatible server (the real ``openai`` client talks to it over HTTP)."""

from __future__ import annotations

import datetime

import pytest
from django.test import override_settings
from django.utils import timezone

from agent_handshake.models import ConverseSession
from tests.ahp.test_converse import ask, llm_settings

pytestmark = pytest.mark.django_db


def test_a_turn_asked_while_the_session_was_live_is_kept_when_its_answer_outlasts_the_idle_time(
    client, demo_content, fake_openai, time_machine
):
    # The question arrived on a live session; the model took longer than the idle time to answer. The answer was
    # written and its tokens spent, then refused as 410 session_expired, and the turn was lost.
    with override_settings(AGENT_HANDSHAKE=llm_settings(fake_openai, SESSION_IDLE_SECONDS=1)):
        response, first = ask(client, "How is gyokuro grown?")
        assert response.status_code == 200, first
        session_id = first["session_id"]

        def slow_reply(request):
            time_machine.move_to(timezone.now() + datetime.timedelta(seconds=1.5))  # the model takes 1.5 s
            return "Brew gyokuro at 50 to 60 °C [1]."

        fake_openai.reply = slow_reply
        response, second = ask(client, "How do I brew gyokuro?", session_id=session_id)
        assert response.status_code == 200, second
        assert second["session_id"] == session_id
        assert second["response"]["answer"].startswith("Brew gyokuro at 50 to 60 °C [1].")
    session = ConverseSession.objects.get(pk=session_id)
    assert [turn["query"] for turn in session.turns] == ["How is gyokuro grown?", "How do I brew gyokuro?"]
    assert session.tokens_used == 2 * fake_openai.usage_tokens


def conversation_in(prompt: str) -> str:
    return prompt.split("<conversation>", 1)[1].split("</conversation>", 1)[0] if "<conversation>" in prompt else ""


def test_a_model_asked_about_the_first_question_is_shown_it_after_more_than_three_turns(
    client, demo_content, fake_openai
):
    # A model is shown the last three turns; asked which tea came first after four, it was never shown the first
    # question, and answered with the oldest of the three it saw.
    questions = [
        "How hot should the water be for gyokuro?",
        "What does CTC stand for?",
        "How do I brew sencha?",
        "How is hojicha roasted?",
    ]
    with override_settings(AGENT_HANDSHAKE=llm_settings(fake_openai)):
        session_id = None
        for question in questions:
            response, body = ask(client, question, session_id=session_id)
            assert response.status_code == 200, body
            session_id = body["session_id"]
        response, recalled = ask(client, "Which tea did I ask about first?", session_id=session_id)
        assert response.status_code == 200, recalled
        conversation = conversation_in(fake_openai.chat_requests()[-1]["messages"][1]["content"])
        assert "Q: How hot should the water be for gyokuro?" in conversation
        # Every question, in the order asked.
        positions = [conversation.index(f"Q: {question}") for question in questions]
        assert positions == sorted(positions)

        # Any other question still shows the model the last three turns only.
        ask(client, "And how long should it steep?", session_id=session_id)
        conversation = conversation_in(fake_openai.chat_requests()[-1]["messages"][1]["content"])
        assert "gyokuro" not in conversation
        assert conversation.count("<turn>") == 3


@pytest.mark.parametrize(("idle", "said"), [(1, "1 second"), (45, "45 seconds"), (90, "90 seconds")])
def test_an_expired_sessions_message_says_how_long_it_waited(client, settings, idle, said):
    """Under a minute, the 410 said "expired after 0 minutes"."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "SESSION_IDLE_SECONDS": idle}
    first = client.post(
        "/agent/converse", {"capability": "content_search", "query": "hello"}, content_type="application/json"
    ).json()
    ConverseSession.objects.filter(pk=first["session_id"]).update(
        last_active_at=timezone.now() - datetime.timedelta(seconds=idle + 5)
    )
    body = client.post(
        "/agent/converse",
        {"capability": "content_search", "query": "still there?", "session_id": first["session_id"]},
        content_type="application/json",
    ).json()
    assert body["reason"] == "session_expired"
    assert f"expired after {said} without a request" in body["message"], body["message"]
