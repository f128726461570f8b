"""Answer quality on the demo content: do answers lead with the fact, cite the right page, and stay short?

``bench/data/answer_quality.json`` holds 44 questions written by hand from the demo's posts, pages, videos and
products, each with the fact a correct answer must state (a regular expression: "8 ?%", "1849") and the
pages that state it; the answering code was tuned on them. ``bench/data/answer_quality_heldout.json`` holds 30
more, written later from the content alone and never tuned against: the two columns of the table.
``bench/data/answer_quality_heldout2.json`` holds 40 more, the column "held-out 2 (blind)": written by someone
who had not seen the answering code nor any answer it gave, from the demo fixtures alone (at most two questions per
page, many worded unlike their page), avoiding the facts of both other sets; its misses are never printed, so it stays
blind. ``bench/data/answer_quality_heldout3.json`` holds 40 more written the same way (no code, no answers seen),
but as development data: its misses are printed and were read; ``bench/data/answer_quality_heldout4.json`` 40 more,
worded unlike their pages on purpose (everyday words for the page's own), development data too. Each
question goes to ``POST /agent/converse`` (``content_search``, ``text/answer``, the configured answer backend:
extractive by default) through the Django WSGI handler, on a fresh database holding the demo content, indexed by
the app. Reported:

- the fact anywhere in the answer, and within its first 40 words (targets: the latter for at least 85 %);
- the first source one of the fact's pages (target: at least 90 %);
- the median answer length in words (target: at most 60), and the answer time.

Before anything is asked, every fact is checked against its pages' own text, so a typo in the set fails loudly.

``bench/data/answer_quality_heldout5.json`` (20, development) and ``answer_quality_heldout5_blind.json`` (20, blind)
are 40 more answerable questions in the same form, written before the answers were tuned on anything, and split
at random (seed 1866, see bench/README.md). ``bench/data/answer_unanswerable.json`` (20, development) and
``answer_unanswerable_blind.json`` (20, blind) are questions the site cannot answer: near misses (a drink it never
covers, a sibling of one of its events, an appliance beside its teaware, the price of a product it does not sell,
a detail its page does not state) and a few far ones, each checked against the fixtures by searching their text.
For those the second table reports:

- "honest nothing": the reply says the site has nothing on the question. Read from the structured signal, not
  the answer's wording: the concierge's ``Reply.no_answer``, which the request's traffic-insights record carries
  as its outcome (``no_answer``); a reply with no sources but the closest page (``background``) is the same signal
  where no record is written;
- "unrelated answer": a reply presented as an answer (and, of those, the ones the concierge flagged as a weak
  match, ``Reply.weak``).

The blind files (``*_blind*.json``) and held-out 2 are left out with ``--development-only``, and their misses are
never printed: they are read once, when a change is settled.

    python bench/bench_answer_quality.py [--show-misses] [--development-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

from common import lifted_limits, print_table

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "data" / "answer_quality.json"
#: Written after the answering code was tuned, by someone else, from the content alone; never tuned against.
HELD_OUT = HERE / "data" / "answer_quality_heldout.json"
#: Written blind (no answering code, no answers seen); nobody tunes against it, and --show-misses leaves it out.
HELD_OUT_2 = HERE / "data" / "answer_quality_heldout2.json"
#: Written later as development data, from the content alone without seeing the code or any answer; its misses were
#: read, so it is development data like the first two.
HELD_OUT_3 = HERE / "data" / "answer_quality_heldout3.json"
#: 40 more, worded unlike their pages (everyday words for the page's own, details from the middle of the text), as
#: development data too.
HELD_OUT_4 = HERE / "data" / "answer_quality_heldout4.json"
#: 40 more answerable questions written before any tuning on them, split at random: a development half ...
HELD_OUT_5 = HERE / "data" / "answer_quality_heldout5.json"
#: ... and a blind half, read once when a change is settled (left out by --development-only).
HELD_OUT_5_BLIND = HERE / "data" / "answer_quality_heldout5_blind.json"
#: Questions the site cannot answer (near misses and a few far ones): a development half and a blind half.
UNANSWERABLE = HERE / "data" / "answer_unanswerable.json"
UNANSWERABLE_BLIND = HERE / "data" / "answer_unanswerable_blind.json"
BLIND = "held-out 2 (blind)"
BLIND_5 = "held-out 5 (blind)"
NEAR_MISS = "cannot answer"
NEAR_MISS_BLIND = "cannot answer (blind)"
#: The columns whose misses are never printed, and which --development-only leaves out.
BLIND_SETS = {BLIND, BLIND_5, NEAR_MISS_BLIND}
LEAD_WORDS = 40


def demo_site(database: str) -> None:
    from bench_retrieval_quality import fresh_database

    fresh_database(database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("loaddata", "demo", verbosity=0)
    call_command("agent_reindex", verbosity=0)


def check_set(questions: list[dict]) -> None:
    """Every fact is in one of its pages (the set is written from the content; a typo must not pass)."""
    from agent_handshake.models import Document

    for item in questions:
        texts = [f"{d.title}\n{d.summary}\n{d.markdown}" for d in Document.objects.filter(url__in=item["urls"])]
        if len(texts) != len(item["urls"]):
            raise SystemExit(f"unknown page in {item}")
        if not any(re.search(item["fact"], text, re.IGNORECASE) for text in texts):
            raise SystemExit(f"the fact {item['fact']!r} is on none of its pages: {item['q']!r}")


def check_unanswerable(questions: list[dict]) -> None:
    """Every question the site cannot answer names a known page as its nearest, if it names one."""
    from agent_handshake.models import Document

    for item in questions:
        if item.get("nearest") and not Document.objects.filter(url=item["nearest"]).exists():
            raise SystemExit(f"unknown nearest page in {item}")


def ask(handler, question: str) -> tuple[dict, float]:
    from django.test.client import RequestFactory

    body = json.dumps({"ahp": "0.1", "capability": "content_search", "query": question}).encode()
    environ = RequestFactory().post("/agent/converse", data=body, content_type="application/json").environ
    status: list[str] = []
    began = time.perf_counter()
    chunks = b"".join(handler(environ, lambda s, h, e=None: status.append(s)))
    elapsed = time.perf_counter() - began
    assert status[0].startswith("200"), (status, chunks[:300])
    return json.loads(chunks), elapsed


def no_answer_signal(handler, question: str) -> tuple[dict, float, bool, bool]:
    """Ask ``question``; the body, the time, whether the site said it has nothing, and whether the reply was
    flagged as a weak match.

    The signal is the concierge's own (``Reply.no_answer`` and ``Reply.weak``), which the HTTP body does not carry
    but the request's traffic-insights record does (outcome ``no_answer``, ``weak``): the waiting records are
    written first, so the one written after the question is its own. Where none is written (insights off), a reply
    without sources is the same signal (``no_answer`` is set when retrieval kept nothing)."""
    from agent_handshake.insights import recording
    from agent_handshake.models import AgentRequest

    recording.flush()
    body, elapsed = ask(handler, question)
    response = body.get("response")
    if response is None:  # a clarification: neither nothing nor an answer
        return body, elapsed, False, False
    # The closest page, named beside an honest "nothing", is a "background" source: no support for an answer.
    empty = all(source.get("relevance") == "background" for source in response["sources"])
    if recording.flush() != 1:
        return body, elapsed, empty, False
    record = AgentRequest.objects.order_by("-pk").first()
    nothing = record.outcome == "no_answer"
    if nothing != empty:
        count = len(response["sources"])
        print(f"  (the record says no_answer={nothing}, the reply has {count} sources: {question!r})")
    return body, elapsed, nothing, record.weak


def measure(handler, questions: list[dict]) -> tuple[dict[str, object], list[tuple]]:
    """The figures for one question set, and its misses."""
    anywhere = lead = first_source = 0
    lengths: list[int] = []
    times: list[float] = []
    misses = []
    for item in questions:
        body, elapsed = ask(handler, item["q"])
        times.append(elapsed)
        answer = body["response"]["answer"]
        words = answer.split()
        lengths.append(len(words))
        fact = re.compile(item["fact"], re.IGNORECASE)
        found = bool(fact.search(answer))
        led = bool(fact.search(" ".join(words[:LEAD_WORDS])))
        sources = [source["url"] for source in body["response"]["sources"]]
        right = bool(sources) and sources[0] in item["urls"]
        anywhere += found
        lead += led
        first_source += right
        if not (led and right):
            misses.append((item["q"], item["fact"], led, right, sources[:1], answer))
    total = len(questions)
    figures = {
        "anywhere": f"{anywhere / total:.0%} ({anywhere}/{total})",
        "lead": f"{lead / total:.0%} ({lead}/{total})",
        "first_source": f"{first_source / total:.0%} ({first_source}/{total})",
        "median_words": statistics.median(lengths),
        "p50_ms": round(statistics.median(times) * 1000, 1),
    }
    return figures, misses


def measure_nothing(handler, questions: list[dict]) -> tuple[dict[str, object], list[tuple]]:
    """The figures for a set of questions the site cannot answer, and the replies presented as answers."""
    nothing = unrelated = weak = clarified = 0
    times: list[float] = []
    misses = []
    for item in questions:
        body, elapsed, said_nothing, flagged_weak = no_answer_signal(handler, item["q"])
        times.append(elapsed)
        if body.get("response") is None:
            clarified += 1
            continue
        if said_nothing:
            nothing += 1
            continue
        unrelated += 1
        weak += flagged_weak
        sources = [source["url"] for source in body["response"]["sources"]]
        misses.append((item["q"], item.get("nearest"), flagged_weak, sources[:1], body["response"]["answer"]))
    total = len(questions)
    figures = {
        "nothing": f"{nothing / total:.0%} ({nothing}/{total})",
        "unrelated": f"{unrelated / total:.0%} ({unrelated}/{total})",
        "weak": f"{weak}/{unrelated}",
        "clarified": f"{clarified}/{total}",
        "p50_ms": round(statistics.median(times) * 1000, 1),
    }
    return figures, misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="agent_handshake_bench_answers")
    parser.add_argument("--show-misses", action="store_true", help="print each question whose fact is not led with")
    parser.add_argument(
        "--development-only",
        action="store_true",
        help="leave the blind sets out (their columns are read once, when a change is settled, not while tuning)",
    )
    args = parser.parse_args()
    sets = {
        "tuning": json.loads(QUESTIONS.read_text()),
        "held-out": json.loads(HELD_OUT.read_text()),
        "held-out 3": json.loads(HELD_OUT_3.read_text()),
        "held-out 4": json.loads(HELD_OUT_4.read_text()),
        "held-out 5": json.loads(HELD_OUT_5.read_text()),
    }
    unanswerable = {NEAR_MISS: json.loads(UNANSWERABLE.read_text())}
    if not args.development_only:
        sets[BLIND] = json.loads(HELD_OUT_2.read_text())
        sets[BLIND_5] = json.loads(HELD_OUT_5_BLIND.read_text())
        unanswerable[NEAR_MISS_BLIND] = json.loads(UNANSWERABLE_BLIND.read_text())
    demo_site(args.database)
    for questions in sets.values():
        check_set(questions)
    for questions in unanswerable.values():
        check_unanswerable(questions)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    handler = WSGIHandler()
    results = {}
    with override_settings(AGENT_HANDSHAKE=lifted_limits(settings.AGENT_HANDSHAKE)):
        for name, questions in sets.items():
            results[name] = measure(handler, questions)
        for name, questions in unanswerable.items():
            results[name] = measure_nothing(handler, questions)
    backend = settings.AGENT_HANDSHAKE.get("ANSWER_BACKEND") or "extractive"
    rows = [
        ("fact anywhere in the answer", "anywhere", ""),
        (f"fact in the first {LEAD_WORDS} words", "lead", ">= 85 %"),
        ("first source is the fact's page", "first_source", ">= 90 %"),
        ("median answer length (words)", "median_words", "<= 60"),
        ("answer p50 (ms)", "p50_ms", ""),
    ]
    print_table(
        f"Answer quality on the demo content ({backend} answers)",
        ["measure", *(f"{name} ({len(questions)})" for name, questions in sets.items()), "target"],
        [[label, *(results[name][0][field] for name in sets), target] for label, field, target in rows],
    )
    nothing_rows = [
        ("honest nothing (the site says it has nothing)", "nothing", ""),
        ("unrelated answer (presented as an answer)", "unrelated", ""),
        ("  of which flagged as a weak match", "weak", ""),
        ("clarification asked instead", "clarified", ""),
        ("answer p50 (ms)", "p50_ms", ""),
    ]
    print_table(
        f"Questions the demo site cannot answer ({backend} answers)",
        ["measure", *(f"{name} ({len(questions)})" for name, questions in unanswerable.items()), "target"],
        [[label, *(results[name][0][field] for name in unanswerable), target] for label, field, target in nothing_rows],
    )
    if args.show_misses:
        for name in (name for name in sets if name not in BLIND_SETS):
            for question, fact, led, right, first, answer in results[name][1]:
                print(f"\n- [{name}] {question}  [fact /{fact}/ led: {led}; first source right: {right} {first}]")
                print(f"  {answer}")
        for name in (name for name in unanswerable if name not in BLIND_SETS):
            for question, nearest, weak, first, answer in results[name][1]:
                print(f"\n- [{name}] {question}  [answered, weak: {weak}; first source {first}; nearest {nearest}]")
                print(f"  {answer}")


if __name__ == "__main__":
    main()
