"""Semantic routing: which capability an AHP request that names none goes to, and how fast it is decided.

Every set holds phrasings written by hand, each labelled with the capability a careful human would choose, 16 or 32
for each demo capability an agent would route to: the MODE3 ones (check_inventory, order_status, custom_quote,
book_appointment, escalate_to_human) and the answering ones (content_search, site_info, contact); ``get_<model>``
capabilities have none of their own (they answer content questions restricted to one content type: a content_search
phrasing routed to one counts as answered).

- ``bench/data/routing.json`` (256): its "tune" half (even positions) chose the thresholds, its "held-out" half was
  read as development data too.
- ``bench/data/routing_heldout3.json`` (128): written from the demo content and the capabilities' names,
  descriptions and input schemas (not their examples), without the routing code or results; development data.
- ``bench/data/routing_heldout5.json`` (128): written the same way, later, by someone who had seen none of the sets
  or results; the validation set of the demo's routing examples (below): never added to them, never tuned on.
- ``bench/data/routing_heldout2.json`` (128, blind): written the same way by someone who never saw a routing result;
  only its totals are printed (never a miss), and nobody tunes against it.

The demo site ships **routing examples** (the admin's "Routing examples",
:class:`agent_handshake.models.RoutingExample`, loaded by ``manage.py demo_load``): the 384 phrasings of
``routing.json`` and ``routing_heldout3.json``. So each set is routed twice: by the capabilities' own texts alone
(intent, description, declared examples: the router's part), and with the site's routing examples, as the demo
answers. With the examples, the two sets they come from are training
data (their column is a check, not a figure); held-out 5 and the blind set are the figures to quote.

Each phrasing is routed as ``POST /agent/converse`` without ``capability`` routes it
(:func:`agent_handshake.concierge.turns.route_text`), among the capabilities the demo site offers there (the demo's
content and site profile, as ``manage.py demo_load`` creates them; the test apps' capabilities set aside).
Reported per capability and overall: top-1 (the capability chosen is the right one), and on the blind set the
clarifications (no capability chosen: the candidates offered) and wrong choices. Target: top-1 at least 90 %.

Then the latency of the routing decision (p50 per request, in process, the query's embedding included): the earlier
code ("before": all capability texts passed through the embedding backend's per-process LRU on every request)
against :func:`agent_handshake.concierge.routing.route` (the capabilities' vectors kept in Django's cache), in a warm
process and in a new one (the per-process embedding LRU emptied before each request, as a fresh worker sees it),
and the router with and without the site's routing examples, taking turns.

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
#: printed and were read. With routing.json, the demo's routing examples.
HELD_OUT_3 = HERE / "data" / "routing_heldout3.json"
#: Written the same way, later: the validation set of the demo's routing examples (never one of them).
HELD_OUT_5 = HERE / "data" / "routing_heldout5.json"


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


def tally(items: list[dict], routed, label: str = "", show: bool = False) -> dict[str, list[int]]:
    """Right, clarified and wrong per capability (and "overall"); each miss printed with ``show``."""
    counts: dict[str, list[int]] = {}
    for item in items:
        result = routed(item["query"])
        ok = correct(item["capability"], result.chosen)
        kind = 0 if ok else 1 if result.chosen is None else 2
        for key in (item["capability"], "overall"):
            counts.setdefault(key, [0, 0, 0])[kind] += 1
        if not ok and show:
            top = ", ".join(f"{s.capability.name} {s.score:.2f}" for s in result.ranked[:3])
            chosen = result.chosen.name if result.chosen else "clarification"
            print(f"  [{label}] {item['capability']}: {item['query']!r} -> {chosen} ({top})")
    return counts


def cell(counts: list[int] | None, detail: bool = False) -> str:
    if not counts:
        return ""
    right, clarified, wrong = counts
    total = sum(counts)
    text = f"{right}/{total} ({100 * right / total:.1f} %)"
    return f"{text}, {clarified} clarified, {wrong} wrong" if detail else text


def pct(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="agent_handshake_bench_routing")
    parser.add_argument("--show-misses", action="store_true", help="print each development phrasing not routed right")
    parser.add_argument("--rounds", type=int, default=2, help="latency: passes over the sample per variant")
    parser.add_argument("--latency-queries", type=int, default=32, help="latency: phrasings sampled")
    parser.add_argument(
        "--no-blind", action="store_true", help="leave the blind set out entirely (while tuning: it is not even routed)"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency measurement")
    args = parser.parse_args()

    demo_site(args.database)
    from django.core.management import call_command

    from agent_handshake.concierge.routing import Scored, forget_site_examples, route_ranked
    from agent_handshake.concierge.turns import answering_capabilities, route_text
    from agent_handshake.conf import app_settings
    from agent_handshake.models import RoutingExample
    from agent_handshake.retrieval import embeddings

    def load(name: Path) -> list[dict]:
        return json.loads(name.read_text())["phrasings"]

    phrasings = load(PHRASINGS)
    sets = {
        "tune": [item for item in phrasings if item["half"] == "tune"],
        "held-out": [item for item in phrasings if item["half"] == "heldout"],
        "held-out 3": load(HELD_OUT_3),
        "held-out 5": load(HELD_OUT_5),
    }
    blind = [] if args.no_blind else load(BLIND)
    capabilities = [
        c
        for c in answering_capabilities()
        if c.handler and c.handler.__module__.startswith(("agent_handshake", "demo"))
    ]
    names = {c.name for c in capabilities}
    missing = sorted({item["capability"] for items in (*sets.values(), blind) for item in items} - names)
    assert not missing, f"not offered on /agent/converse: {missing}"
    demo_examples = [(example.capability, example.text, example.note) for example in RoutingExample.objects.all()]
    training = {(capability, text) for capability, text, _ in demo_examples}

    def with_examples(present: bool) -> None:
        """The site's routing examples as the demo has them, or none (the capabilities' own texts alone)."""
        if present != RoutingExample.objects.exists():
            if present:
                call_command("loaddata", "demo_routing_examples", verbosity=0)
            else:
                RoutingExample.objects.all().delete()
        forget_site_examples()

    def routed(query: str):
        return route_text(query, capabilities)

    def routed_before(query: str):
        """The router before semantic routing had a default: the texts alone, no content fit."""
        ranked = [Scored(capability, score) for capability, score in legacy_rank(query, capabilities)]
        return route_ranked(ranked)

    results: dict[str, dict[str, dict[str, list[int]]]] = {}
    with_examples(False)
    results["before"] = tally(phrasings, routed_before)
    for label, items in sets.items():
        results[label] = tally(items, routed, label, args.show_misses)
    results["blind"] = tally(blind, routed)
    with_examples(True)
    trained = [item for items in sets.values() for item in items if (item["capability"], item["query"]) in training]
    untrained = {
        label: [i for i in items if (i["capability"], i["query"]) not in training] for label, items in sets.items()
    }
    results["examples: training"] = tally(trained, routed)
    for label, items in untrained.items():
        if items:
            results[f"examples: {label}"] = tally(items, routed, f"{label}, with examples", args.show_misses)
    results["examples: blind"] = tally(blind, routed)

    order = [*dict.fromkeys(item["capability"] for item in phrasings), "overall"]
    columns = [("before", "routing.json, before"), ("tune", "tune"), ("held-out", "held-out"),
               ("held-out 3", "held-out 3"), ("held-out 5", "held-out 5"), ("blind", "held-out 2 (blind)")]  # fmt: skip
    print_table(
        f"Routing by the capabilities' own texts, no routing examples ({len(capabilities)} capabilities; "
        f"ROUTING_MIN_SCORE {app_settings.ROUTING_MIN_SCORE}, ROUTING_MARGIN {app_settings.ROUTING_MARGIN}, "
        f"ROUTING_CONTENT_MARGIN {app_settings.ROUTING_CONTENT_MARGIN}, "
        f"ROUTING_CUE_WEIGHT {app_settings.ROUTING_CUE_WEIGHT})",
        ["capability", *(title for _, title in columns)],
        [[name, *(cell(results[key].get(name), key == "blind") for key, _ in columns)] for name in order],
    )
    columns = [(f"examples: {label}", label) for label in untrained if untrained[label]]
    columns = [("examples: training", "training (check)"), *columns, ("examples: blind", "held-out 2 (blind)")]
    print_table(
        f"With the demo's {len(demo_examples)} routing examples (the phrasings of routing.json and held-out 3)",
        ["capability", *(title for _, title in columns)],
        [[name, *(cell(results[key].get(name), key == "examples: blind") for key, _ in columns)] for name in order],
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
        # The earlier code had no routing examples: it is timed with none, on the capabilities' texts alone.
        "before (LRU, warm process)": (legacy, None, False),
        "after (Django cache, warm process)": (routed, None, True),
        "after, no routing examples (warm process)": (routed, None, False),
        "before (new process)": (legacy, fresh_process, False),
        "after (new process, cache filled)": (routed, fresh_process, True),
    }
    for present in (False, True):  # the cache filled once for each, as the first request of a deployment does
        with_examples(present)
        routed(queries[0])
    sample = queries[:: max(1, len(queries) // args.latency_queries)][: args.latency_queries]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for warm in (True, False):
        legacy("warm-up")  # the warm variants find the capability texts in the LRU
        for round_number in range(args.rounds):
            for index, (name, (run, prepare, present)) in enumerate(variants.items()):
                if (prepare is None) != warm:
                    continue
                with_examples(present)  # outside the timing: a variant's whole pass, then the next one's
                routed("warm-up")
                for number, query in enumerate(sample):
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
