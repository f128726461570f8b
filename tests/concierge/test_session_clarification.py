"""Answers to a content_search clarification (AHP §6.3) in a POST /agent/converse session: on the demo content, with
the real embedding model and PostgreSQL."""

from __future__ import annotations

import pytest

from agent_handshake.models import ConverseSession, Document
from tests.ahp.test_converse import ask

pytestmark = pytest.mark.django_db


def test_the_same_answer_to_a_clarification_sent_again_chooses_what_it_chose(client, demo_content):
    # An agent whose first answer's response was lost sends it again. The clarification was already answered, so
    # "videos" was read as free text ("matcha videos") over the whole site: shop and blog pages came back.
    response, asked = ask(client, "matcha")
    assert response.status_code == 200, asked
    assert asked["status"] == "clarification_needed", asked
    assert "videos" in asked["clarification"]["options"]
    session_id = asked["session_id"]
    videos = set(Document.objects.filter(content_type__app_label="videos").values_list("url", flat=True))

    answers = [ask(client, "matcha", session_id=session_id, clarification="videos") for _ in range(2)]
    for response, answer in answers:
        assert response.status_code == 200, answer
        assert answer["status"] == "success", answer
        assert answer["session_id"] == session_id
        assert answer["response"]["sources"]
        assert {source["url"] for source in answer["response"]["sources"]} <= videos, answer["response"]["sources"]
    (_, first), (_, again) = answers
    assert again["response"]["sources"] == first["response"]["sources"]
    session = ConverseSession.objects.get(pk=session_id)
    assert session.pending_clarification is None
    assert [turn["query"] for turn in session.turns] == ["matcha", "matcha"]


def test_another_question_with_a_clarification_after_one_was_answered_is_free_text(client, demo_content):
    # Only a repeat of the same answer to the same question chooses again; anything else is added to the query.
    _, asked = ask(client, "matcha")
    session_id = asked["session_id"]
    ask(client, "matcha", session_id=session_id, clarification="videos")
    response, other = ask(client, "sencha", session_id=session_id, clarification="videos")
    assert response.status_code == 200, other
    session = ConverseSession.objects.get(pk=session_id)
    assert session.turns[-1]["standalone_query"] == "sencha videos"
