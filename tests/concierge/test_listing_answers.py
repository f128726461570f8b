"""Questions that are not about a sentence on the site: what it has ("What videos do you have?", answered with its
items), what it is ("What is this site about?", answered with its profile), and what was just asked (from the
session)."""

from __future__ import annotations

import re

import pytest

from agent_handshake import state
from agent_handshake.concierge.listing import LISTED
from agent_handshake.models import Document
from tests.ahp.test_converse import ask


def videos() -> list[Document]:
    return list(Document.objects.filter(content_type__app_label="videos"))


@pytest.mark.django_db
@pytest.mark.parametrize("question", ["What videos do you have?", "What has been published about video?"])
def test_a_question_about_what_a_section_holds_lists_its_items(client, demo_content, question):
    _, body = ask(client, question)
    response = body["response"]
    every = videos()
    assert response["answer"].startswith(f"Videos ({len(every)}): ")
    listed = response["sources"]
    assert len(listed) == min(LISTED, len(every))
    assert {source["url"] for source in listed} <= {document.url for document in every}
    for number, source in enumerate(listed, start=1):
        assert f"“{source['title']}” [{number}]" in response["answer"]
    assert response["answer"].endswith(f"and {len(every) - LISTED} more.")


@pytest.mark.django_db
def test_words_beside_the_section_narrow_the_list_to_the_titles_holding_them(client, demo_content):
    _, body = ask(client, "Which oolong videos do you have?")
    titles = [source["title"] for source in body["response"]["sources"]]
    expected = [document.title for document in videos() if re.search(r"\boolong\b", document.title, re.IGNORECASE)]
    assert expected
    assert sorted(titles) == sorted(expected)
    assert body["response"]["answer"].startswith(f"Videos ({len(expected)}): ")


@pytest.mark.django_db
def test_a_question_naming_no_section_is_answered_from_the_sentences(client, demo_content):
    _, body = ask(client, "What do you have for a sore throat?")
    assert not re.match(r"^\w+ \(\d+\): ", body["response"]["answer"])


@pytest.mark.django_db
def test_what_the_site_is_about_is_its_profile(client, demo_content):
    _, body = ask(client, "What is this site about?")
    snapshot = state.snapshot()
    assert body["response"]["answer"] == f"{snapshot.name}: {snapshot.description}"
    assert body["response"]["sources"] == []


@pytest.mark.django_db
def test_what_was_just_asked_is_answered_from_the_session(client, demo_content):
    _, first = ask(client, "How hot should the water be for gyokuro?")
    _, recalled = ask(client, "Which tea did I just ask about?", session_id=first["session_id"])
    assert recalled["response"]["answer"].startswith(
        "Your last question was “How hot should the water be for gyokuro?”"
    )
