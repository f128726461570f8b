"""Answers checked by the reader (the packaged cross-encoder, the real model): a question near the site's content
that it does not answer gets an honest "nothing" naming the closest page; the sentence that answers leads; the
sources are the pages the answer uses; and without the model files the site still answers, and says so at start."""

from __future__ import annotations

import re

import pytest
from django.core import checks
from django.test import override_settings

from agent_handshake import state
from agent_handshake.retrieval.reader import get_reader
from tests.ahp.test_converse import ask, llm_settings

NOTHING = "has nothing that answers this question"

#: Near misses: retrieval finds neighbouring pages (similar enough to pass the relevance floor), but nothing on the
#: demo site says any of this.
NEAR_MISSES = ["Do you host a tea cocktail night with gin?", "Do you sell a milk frother for lattes?"]


@pytest.mark.django_db
@pytest.mark.parametrize("question", NEAR_MISSES)
def test_a_near_miss_gets_an_honest_nothing_naming_the_closest_page(client, demo_content, question):
    _, body = ask(client, question)
    response = body["response"]
    assert NOTHING in response["answer"], response["answer"]
    assert "The closest page is “" in response["answer"]
    # The closest page is somewhere to look, not support for an answer.
    assert [source["relevance"] for source in response["sources"]] == ["background"]
    assert response["sources"][0]["title"] in response["answer"]
    # The decision is the reader's: with its threshold out of the way, the same question is answered.
    with override_settings(AGENT_HANDSHAKE={"READER_MIN_SCORE": -100.0}):
        _, answered = ask(client, question)
    assert NOTHING not in answered["response"]["answer"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("How hot should the water be for gyokuro?", r"55(–60)? °C"),
        ("How much does US standard shipping cost?", r"\$6\.50"),
    ],
)
def test_a_question_the_site_answers_is_answered_and_leads_with_the_fact(client, demo_content, question, fact):
    _, body = ask(client, question)
    text = body["response"]["answer"]
    assert NOTHING not in text
    assert re.search(fact, " ".join(text.split()[:40])), text


@pytest.mark.django_db
def test_the_reader_chooses_the_sentence_that_answers_over_the_one_sharing_more_words(client, demo_content, tmp_path):
    """On the demo, the word scores lead with the Hagi bowl's product page (it shares "matcha bowl"); the reader
    finds the brewing guide's sentence that says how wide, and leads with it."""
    question = "How wide should my matcha bowl be?"
    _, body = ask(client, question)
    assert "11–12 cm" in " ".join(body["response"]["answer"].split()[:20]), body["response"]["answer"]
    with override_settings(AGENT_HANDSHAKE={"READER_MODEL_DIR": str(tmp_path)}):  # no model files: words alone
        _, words = ask(client, question)
    assert "11–12 cm" not in " ".join(words["response"]["answer"].split()[:20]), words["response"]["answer"]


@pytest.mark.django_db
def test_what_the_site_is_about_is_answered_with_its_description_alone(client, demo_content):
    _, body = ask(client, "What is this site about?", capability="site_info")
    snapshot = state.snapshot()
    assert body["response"]["answer"] == f"{snapshot.name}: {snapshot.description}"


@pytest.mark.django_db
def test_a_source_the_answer_does_not_use_is_marked_background(client, demo_content):
    """The sources list every page retrieved (a result list, in NLWeb's shape too), so that no agent mistakes one
    the answer does not cite for support, the uncited are ``background``, however close they scored."""
    _, body = ask(client, "How hot should the water be for gyokuro?")
    response = body["response"]
    assert len(response["sources"]) >= 3
    cited = {int(number) for number in re.findall(r"\[(\d+)\]", response["answer"])} | {1}
    relevance = {number: source["relevance"] for number, source in enumerate(response["sources"], start=1)}
    assert {number for number, kind in relevance.items() if kind == "direct"} == cited, response
    assert {kind for number, kind in relevance.items() if number not in cited} == {"background"}


@pytest.mark.django_db
def test_without_the_model_files_answers_fall_back_and_a_check_says_so(client, demo_content, tmp_path):
    with override_settings(AGENT_HANDSHAKE={"READER_MODEL_DIR": str(tmp_path)}):
        assert get_reader() is None
        warnings = [message for message in checks.run_checks() if message.id == "agent_handshake.W010"]
        assert len(warnings) == 1
        assert "model.onnx" in warnings[0].msg
        _, body = ask(client, "How hot should the water be for gyokuro?")
        assert re.search("55(–60)? °C", body["response"]["answer"])
        _, near = ask(client, NEAR_MISSES[0])  # without the reader, no honest nothing for a near miss
        assert NOTHING not in near["response"]["answer"]
    assert get_reader() is not None
    assert not [message for message in checks.run_checks() if message.id == "agent_handshake.W010"]


@pytest.mark.django_db
def test_a_model_is_given_the_sentences_the_reader_found_to_answer(client, demo_content, fake_openai, tmp_path):
    """With an answer model, the prompt's sources hold the reader's sentences (and the one after each), not the
    passages whole: fewer words, the one that answers among them."""
    question = "How wide should my matcha bowl be?"

    def sources_sent() -> str:
        user = fake_openai.chat_requests()[-1]["messages"][1]["content"]
        return user.split("<question>", 1)[0]

    with override_settings(AGENT_HANDSHAKE=llm_settings(fake_openai)):
        ask(client, question)
    read = sources_sent()
    with override_settings(AGENT_HANDSHAKE=llm_settings(fake_openai, READER_MODEL_DIR=str(tmp_path))):
        ask(client, question)
    whole = sources_sent()
    assert "ideally 11–12 cm across" in read
    assert "ideally 11–12 cm across" in whole
    assert len(read.split()) < len(whole.split()) / 2, (len(read.split()), len(whole.split()))
