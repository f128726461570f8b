"""Citations in a model's reply written oddly ("[01]", "[1, 2]"): through POST /agent/converse with the real
``openai`` client against the tests' fake server, each is written as the source number it names, and a number
naming no source is dropped, as "[9]" is."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.ahp.test_converse import ask, llm_settings
from tests.concierge.test_model_replies import finishing

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("reply", "expected", "cited"),
    [
        ("Gyokuro is shaded before harvest [01].", "Gyokuro is shaded before harvest [1].", {1}),
        ("Gyokuro is shaded before harvest [002].", "Gyokuro is shaded before harvest [2].", {2}),
        ("Gyokuro is shaded before harvest [1][00].", "Gyokuro is shaded before harvest [1].", {1}),
        ("Gyokuro is shaded before harvest [1, 09].", "Gyokuro is shaded before harvest [1].", {1}),
        ("Gyokuro is shaded before harvest [1,2].", "Gyokuro is shaded before harvest [1][2].", {1, 2}),
        ("Gyokuro is shaded before harvest [09, 0].", "Gyokuro is shaded before harvest .", set()),
    ],
)
def test_citations_are_written_as_the_source_numbers_they_name(
    client, demo_content, shaped_openai, reply, expected, cited
):
    shaped_openai.reply = lambda request: reply
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        _, body = ask(client, "Why is gyokuro shaded before harvest?")
    assert body["status"] == "success"
    sources = body["response"]["sources"]
    assert len(sources) >= 3
    assert body["response"]["answer"] == expected
    # A cited source is "direct" (the first always is); an uncited one after it is not.
    assert {n for n, source in enumerate(sources, start=1) if n > 1 and source["relevance"] == "direct"} == cited - {1}


def test_a_reply_cut_off_after_a_list_of_citations_keeps_them(client, demo_content, shaped_openai):
    """``finish_reason: "length"``: a finished sentence ends with its citations, "[1, 2]" as "[1]" does."""
    shaped_openai.reply = lambda request: "Gyokuro is shaded before harvest. [1, 2] Never steep it above"
    shaped_openai.shape = finishing("length")
    with override_settings(AGENT_HANDSHAKE=llm_settings(shaped_openai)):
        _, body = ask(client, "Why is gyokuro shaded before harvest?")
    assert body["response"]["answer"] == "Gyokuro is shaded before harvest. [1][2]"
