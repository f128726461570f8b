"""Calibrating ``READER_MIN_SCORE``: the reader's best score on questions the demo site answers and on ones it cannot.

For every development question (the answerable sets of bench_answer_quality.py and the development half of the
questions it cannot answer; never a blind file), the question is retrieved and read as ``content_search`` reads
it (:meth:`ContentConcierge.unanswered`'s inputs: the top documents' passages, their candidate sentences, the
reader's logits), and the best logit is kept. The table gives, for each candidate threshold, the share of answerable
questions it would refuse and the share of unanswerable ones it would answer; the threshold chosen is the one that
refuses the most unanswerable questions while refusing at most 3 % of the answerable ones.

    python bench/bench_reader_calibration.py
"""

from __future__ import annotations

import json
import statistics
import time

from bench_answer_quality import HELD_OUT, HELD_OUT_3, HELD_OUT_4, HELD_OUT_5, QUESTIONS, UNANSWERABLE, demo_site
from common import print_table

#: The most answerable questions a threshold may refuse.
MAX_REFUSED = 0.03


def best_scores(questions: list[dict]) -> tuple[list[float], list[float]]:
    """The reader's best logit per question (-inf when retrieval kept nothing), and the milliseconds it took."""
    from agent_handshake.concierge.answering import ContentConcierge, ConverseContext
    from agent_handshake.concierge.backends import passages_of
    from agent_handshake.concierge.reading import read
    from agent_handshake.registry import capability_registry

    capability = capability_registry.get("content_search")
    concierge = ContentConcierge()
    scores, times = [], []
    for item in questions:
        ctx = ConverseContext(capability, item["q"], item["q"], "text/answer", None, 200)
        hits = concierge.retriever.search_documents(ctx.query, limit=concierge.sources_limit, filters=ctx.filters)
        if not concierge.relevant(ctx, hits):
            scores.append(float("-inf"))
            continue
        began = time.perf_counter()
        reading = read(ctx.query, passages_of(concierge.evidence(hits)))
        times.append((time.perf_counter() - began) * 1000)
        assert reading is not None, "no reader model installed"
        scores.append(reading.best)
    return scores, times


def main() -> None:
    demo_site("agent_handshake_bench_reader_calibration")
    answerable = [
        item
        for name in (QUESTIONS, HELD_OUT, HELD_OUT_3, HELD_OUT_4, HELD_OUT_5)
        for item in json.loads(name.read_text())
    ]
    unanswerable = json.loads(UNANSWERABLE.read_text())
    yes, yes_ms = best_scores(answerable)
    no, no_ms = best_scores(unanswerable)
    finite = sorted(score for score in yes + no if score != float("-inf"))
    thresholds = sorted({round(score, 1) for score in finite})
    rows, chosen = [], None
    for threshold in thresholds:
        refused = sum(score < threshold for score in yes) / len(yes)
        answered = sum(score >= threshold for score in no) / len(no)
        rows.append([f"{threshold:+.1f}", f"{refused:.0%}", f"{answered:.0%}"])
        if refused <= MAX_REFUSED:
            chosen = threshold
    print_table(
        f"Reader's best logit: {len(yes)} answerable, {len(no)} unanswerable development questions",
        ["threshold", "answerable refused", "unanswerable answered"],
        rows,
    )
    print_table(
        "Distribution",
        ["set", "min", "p10", "median", "max", "read p50 (ms)"],
        [
            [name, f"{min(v):+.2f}", f"{statistics.quantiles(v, n=10)[0]:+.2f}", f"{statistics.median(v):+.2f}",
             f"{max(v):+.2f}", f"{statistics.median(ms):.1f}" if ms else "-"]
            for name, v, ms in (
                ("answerable", [s for s in yes if s != float("-inf")], yes_ms),
                ("unanswerable", [s for s in no if s != float("-inf")], no_ms),
            )
        ],
    )  # fmt: skip
    print(f"\nThe highest threshold refusing at most {MAX_REFUSED:.0%} of the answerable questions: {chosen}")
    for item, score in sorted(zip(unanswerable, no, strict=True), key=lambda row: -row[1])[:8]:
        print(f"  unanswerable {score:+.2f}  {item['q']}")
    for item, score in sorted(zip(answerable, yes, strict=True), key=lambda row: row[1])[:8]:
        print(f"  answerable   {score:+.2f}  {item['q']}")


if __name__ == "__main__":
    main()
