"""Semantic routing: which capability an AHP request that names none goes to, and how fast it is decided.

``bench/data/routing.json`` holds 256 phrasings written by hand, 32 for each demo capability an agent would route
to: the MODE3 ones (check_inventory, order_status, custom_quote, book_appointment, escalate_to_human) and the
answering ones (content_search, site_info, contact); ``get_<model>`` capabilities have none of their own (they
answer content questions restricted to one content type: a content_search phrasing routed to one counts as
answered, and is counted apart). Each list alternates a "tune" half (thresholds were chosen on it) and a
"held-out" half (never tuned against): both columns are printed. ``bench/data/routing_heldout2.json`` holds 128
more (16 per capability), written blind by someone who saw neither the routing code nor any of its results, from the
demo content and the capabilities' names, descriptions and input schemas (not their examples): the "held-out 2
(blind)" column gives its top-1, clarifications and wrong choices, apart from every other figure, and its misses are
never printed, so it stays blind. ``bench/data/routing_heldout3.json`` holds 128 more written the same way, kept as
development data: the "held-out 3" column, whose misses ``--show-misses`` prints.

Each phrasing is routed as ``POST /agent/converse`` without ``capability`` routes it
(:func:`agent_handshake.ahp.converse.route`), among the capabilities the demo site offers there (the demo's
content and site profile, as ``manage.py demo_load`` creates them; the test apps' capabilities set aside).
Reported per capability and overall: top-1 (the capability chosen is the right one), the clarification rate (no
capability chosen: the candidates offered) and wrong choices. Target: top-1 at least 90 % overall.

Then the latency of the routing decision (p50 per request, in process, the query's embedding included), before
and after the capabilities' vectors were kept in Django's cache: "before" is the earlier code (all capability texts
passed through the embedding backend's per-process LRU on every request), "after" is
:func:`agent_handshake.concierge.routing.route`. "New process" empties the per-process embedding LRU before each
request, as a fresh worker (or one whose LRU evicted the texts) sees it: before, every capability text is embedded
again; after, the vectors come from the cache that every process shares.

    python bench/bench_routing.py [--show-misses] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
from common import print_table

HERE = Path(__file__).resolve().parent
PHRASINGS = HERE / "data" / "routing.json"
#: Written blind (no routing code, no results seen); nobody tunes against it, and --show-misses leaves it out.
BLIND = HERE / "data" / "routing_heldout2.json"
#: Written the same way as the blind set (no routing code, no results seen), but as development data: its misses are
#: printed and were read.
HELD_OUT_3 = HERE / "data" / "routing_heldout3.json"


def demo_site(database: str) -> None:
    from bench_retrieval_quality import fresh_database

    fresh_database(database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("demo_load", verbosity=0)
    call_command("agent_reindex", verbosity=0)  # routing weighs the content's fit against action capabilities


def legacy_rank(text: str, capabilities) -> list[tuple[object, float]]:
    """The ranking before this change: every capability text through ``embed`` (the per-process LRU) per request."""
    from agent_handshake.concierge.routing import texts_of
    from agent_handshake.retrieval.embeddings import get_embedding_backend

    described = [texts_of(capability) for capability in capabilities]
    flat = [item for texts in described for item in texts]
    vectors = get_embedding_backend().embed([text, *flat])
    similarity = vectors[1:] @ vectors[0]
    scores, start = [], 0
    for texts in described:
        scores.append(float(np.max(similarity[start : start + len(texts)])))
        start += len(texts)
    return sorted(zip(capabilities, scores, strict=True), key=lambda item: -item[1])


def correct(expected: str, chosen) -> bool:
    """The expected capability, or for a content question a get_<model> one (content_search for one model)."""
    if chosen is None:
        return False
    return chosen.name == expected or (expected == "content_search" and chosen.name.startswith("get_"))


def blind_tally(items: list[dict], routed) -> list[int]:
    """Right, clarified and wrong among the blind phrasings (nothing printed about any one of them)."""
    counts = [0, 0, 0]
    for item in items:
        chosen = routed(item["query"]).chosen
        counts[0 if correct(item["capability"], chosen) else 1 if chosen is None else 2] += 1
    return counts


def blind_cell(counts: list[int]) -> str:
    right, clarified, wrong = counts
    total = sum(counts)
    return f"{right}/{total} ({100 * right / total:.1f} %), {clarified} clarified, {wrong} wrong" if total else ""


def pct(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="agent_handshake_bench_routing")
    parser.add_argument("--show-misses", action="store_true", help="print each phrasing not routed to its capability")
    parser.add_argument("--rounds", type=int, default=2, help="latency: passes over the sample per variant")
    parser.add_argument("--latency-queries", type=int, default=32, help="latency: phrasings sampled")
    parser.add_argument(
        "--no-blind", action="store_true", help="leave the blind set out entirely (while tuning: it is not even routed)"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency measurement")
    args = parser.parse_args()

    demo_site(args.database)
    from agent_handshake.ahp.converse import converse_capabilities, route
    from agent_handshake.ahp.request import ConverseRequest
    from agent_handshake.concierge.routing import Scored, route_ranked
    from agent_handshake.conf import app_settings
    from agent_handshake.retrieval import embeddings

    phrasings = json.loads(PHRASINGS.read_text())["phrasings"]
    blind = [] if args.no_blind else json.loads(BLIND.read_text())["phrasings"]
    third = json.loads(HELD_OUT_3.read_text())["phrasings"]
    capabilities = [
        c for c in converse_capabilities() if c.handler and c.handler.__module__.startswith(("agent_handshake", "demo"))
    ]
    names = {c.name for c in capabilities}
    missing = sorted({item["capability"] for item in phrasings + blind + third} - names)
    assert not missing, f"not offered on /agent/converse: {missing}"

    def routed(query: str):
        return route(ConverseRequest(capability=None, query=query), capabilities)

    def routed_before(query: str):
        """The router before this change: the texts alone, no default, no content fit."""
        ranked = [Scored(capability, score) for capability, score in legacy_rank(query, capabilities)]
        return route_ranked(ranked)

    rows, totals = [], {"tune": [0, 0], "heldout": [0, 0]}
    counts = {"right": 0, "clarified": 0, "wrong": 0, "via_get": 0, "before": 0}
    blind_total = [0, 0, 0]
    third_total = [0, 0]
    for name in dict.fromkeys(item["capability"] for item in phrasings):
        items = [item for item in phrasings if item["capability"] == name]
        right = {"tune": 0, "heldout": 0}
        before = sum(correct(name, routed_before(item["query"]).chosen) for item in items)
        counts["before"] += before
        clarified = wrong = via_get = 0
        for item in items:
            result = routed(item["query"])
            chosen = result.chosen.name if result.chosen else None
            ok = correct(name, result.chosen)
            via_get += ok and chosen != name
            if ok:
                right[item["half"]] += 1
            elif chosen is None:
                clarified += 1
            else:
                wrong += 1
            totals[item["half"]][0] += ok
            totals[item["half"]][1] += 1
            if not ok and args.show_misses:
                top = ", ".join(f"{s.capability.name} {s.score:.2f}" for s in result.ranked[:3])
                print(f"  {name}: {item['query']!r} -> {chosen or 'clarification'} ({top})")
        halves = {half: sum(item["half"] == half for item in items) for half in ("tune", "heldout")}
        third_items = [item for item in third if item["capability"] == name]
        third_right = 0
        for item in third_items:
            result = routed(item["query"])
            if correct(name, result.chosen):
                third_right += 1
            elif args.show_misses:
                top = ", ".join(f"{s.capability.name} {s.score:.2f}" for s in result.ranked[:3])
                chosen = result.chosen.name if result.chosen else "clarification"
                print(f"  [held-out 3] {name}: {item['query']!r} -> {chosen} ({top})")
        third_total = [third_total[0] + third_right, third_total[1] + len(third_items)]
        blind_counts = blind_tally([item for item in blind if item["capability"] == name], routed)
        blind_total = [a + b for a, b in zip(blind_total, blind_counts, strict=True)]
        counts["right"] += sum(right.values())
        counts["clarified"] += clarified
        counts["wrong"] += wrong
        counts["via_get"] += via_get
        rows.append(
            [
                name,
                len(items),
                f"{100 * before / len(items):.1f} %",
                f"{100 * sum(right.values()) / len(items):.1f} %",
                f"{right['tune']}/{halves['tune']}",
                f"{right['heldout']}/{halves['heldout']}",
                f"{100 * clarified / len(items):.1f} %",
                wrong,
                via_get or "",
                f"{third_right}/{len(third_items)}",
                blind_cell(blind_counts),
            ]
        )
    total = len(phrasings)
    rows.append(
        [
            "overall",
            total,
            f"{100 * counts['before'] / total:.1f} %",
            f"{100 * counts['right'] / total:.1f} %",
            f"{totals['tune'][0]}/{totals['tune'][1]}",
            f"{totals['heldout'][0]}/{totals['heldout'][1]}",
            f"{100 * counts['clarified'] / total:.1f} %",
            counts["wrong"],
            counts["via_get"] or "",
            f"{third_total[0]}/{third_total[1]} ({100 * third_total[0] / max(third_total[1], 1):.1f} %)",
            blind_cell(blind_total),
        ]
    )
    print_table(
        f"Routing {total} hand-written phrasings among {len(capabilities)} capabilities "
        f"(ROUTING_MIN_SCORE {app_settings.ROUTING_MIN_SCORE}, ROUTING_MARGIN {app_settings.ROUTING_MARGIN}, "
        f"ROUTING_CONTENT_MARGIN {app_settings.ROUTING_CONTENT_MARGIN}, "
        f"ROUTING_CUE_WEIGHT {app_settings.ROUTING_CUE_WEIGHT})",
        [
            "capability",
            "n",
            "top-1 before",
            "top-1",
            "tune",
            "held-out",
            "clarified",
            "wrong",
            "via get_<model>",
            "held-out 3",
            "held-out 2 (blind)",
        ],
        rows,
    )

    if args.no_latency:
        return
    # Latency: the same phrasings, each variant once per round, interleaved.
    queries = [item["query"] for item in phrasings]

    def fresh_process() -> None:
        with embeddings._caches_lock:
            embeddings._caches.clear()

    legacy = lambda query: legacy_rank(query, capabilities)  # noqa: E731
    variants = {
        "before (LRU, warm process)": (legacy, None),
        "after (Django cache, warm process)": (routed, None),
        "before (new process)": (legacy, fresh_process),
        "after (new process, cache filled)": (routed, fresh_process),
    }
    routed(queries[0])  # the cache filled once, as the first request of a deployment does
    sample = queries[:: max(1, len(queries) // args.latency_queries)][: args.latency_queries]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for warm in (True, False):
        legacy("warm-up")  # the warm variants find the capability texts in the LRU
        for round_number in range(args.rounds):
            for number, query in enumerate(sample):
                for index, (name, (run, prepare)) in enumerate(variants.items()):
                    if (prepare is None) != warm:
                        continue
                    if prepare:
                        prepare()
                    # A text the LRU has not seen (as most queries are), different for every variant.
                    text = f"{query} ({round_number}.{number}.{index})"
                    started = time.perf_counter()
                    run(text)
                    times[name].append(time.perf_counter() - started)
    print_table(
        f"Routing latency per request, in process ({len(sample)} phrasings x {args.rounds} rounds)",
        ["variant", "p50 ms", "p95 ms"],
        [[name, pct(values), f"{np.percentile(values, 95) * 1000:.2f}"] for name, values in times.items()],
    )


if __name__ == "__main__":
    main()
