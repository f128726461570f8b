"""IntentWeb's ``POST /intent``: the final turn of an intent, and a schema template's structured submission
(``POST /schema-templates``), against AHP ``POST /agent/converse`` for the same capability and input, in one run.

Set-up as bench_mcp_openapi.py (SciFact documents indexed by the app, limits lifted, the Django WSGI handler in
process) with its ``bench_lookup`` MODE3 ``query`` capability. For each input, an interaction is started untimed
(an ``intent_request`` that names no title: the site routes it and answers ``information_request``); then, in
turns with the AHP request for the same input, its final ``information_response`` carries the title and is
timed: envelope validation, the timestamp, the nonce written, the agent's Ed25519 chain entry verified (its key
is registered, so verification runs), the interaction locked and updated, the call through the concierge, and the
site's answer signed. The client's own hashing and signing happen before the clock starts. The structured
submission names ``bench_lookup_v1`` (its template published before the clock starts): the template read (one
query) and the payload checked against it, then the same call. Target: within 1.2x.

A second AHP row, for reference, is the same call as an agent would make a transactional one: with an API key
and an ``Idempotency-Key``, so that it too writes (the idempotency record) and pays a durable commit, as the
intent's nonce and state do; the ratios are printed against both.

A last row is the floor: the work a final turn must do beyond the call, alone, with no view, ORM or envelope around
it (the chain entry verified and the site's entry signed; in one transaction, the admission statement that spends
the nonce, reads the keys and locks the interaction, and the interaction's state written; the durable commit). The
call's own transaction runs inside the turn's, so this is added to, not in place of, the AHP call's time: the
final turn can come no closer to the AHP call than (AHP + floor) / AHP.

    python bench/bench_intentweb.py [--seed-docs 1500] [--queries 100]
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import json
import secrets
import time

import rfc8785
from bench_converse import scifact_site
from bench_mcp_openapi import environ, pct, register_lookup, rows_of, timed
from common import lifted_limits, print_table, scifact_arguments
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ACTOR = "https://bench-agent.example/"
WRITING = "POST /agent/converse (API key + Idempotency-Key)"
FLOOR = "floor: verify + sign + admission + state update + commit, alone"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Client:
    """An IntentWeb client from the spec and the published profile (hashlib, rfc8785, cryptography)."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()

    def envelope(self, interaction_id: str, flow_type: str, message: str, query_hash: str | None, **extra) -> dict:
        body = {"protocol_version": "1.0", "flow_type": flow_type, "message": message, "interaction_id": interaction_id}
        query_hash = query_hash or hashlib.sha256(rfc8785.dumps(body)).hexdigest()
        nonce = secrets.token_urlsafe(16)
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        signed = {"actor_id": ACTOR, "nonce": nonce, "query_hash": query_hash, "timestamp": now}
        entry = {"actor_type": "ai_agent", "actor_id": ACTOR, "timestamp": now,
                 "signature": b64url(self.key.sign(rfc8785.dumps(signed)))}  # fmt: skip
        return {**body, "attribution": {"query_hash": query_hash, "nonce": nonce, "timestamp": now,
                                        "chain": [entry]}, **extra}  # fmt: skip


def floor(client: Client, final: dict, site_key) -> float:
    """The seconds the work a final turn adds to the call takes alone (see the module docstring): ``final``'s chain
    entry verified, the site's entry signed, and in one transaction the admission statement (a fresh nonce, so it is
    spent as a real one is) and the interaction's update, committed."""
    from django.db import connection, transaction
    from django.utils import timezone

    from agent_handshake.concierge.interaction_admission import admit_sql, database
    from agent_handshake.intentweb import attribution
    from agent_handshake.models import Interaction

    alias = database()
    table = connection.ops.quote_name(Interaction._meta.db_table)
    given = final["attribution"]
    public_key = client.key.public_key()
    began = time.perf_counter()
    assert attribution.verify_entry(given["chain"][0], query_hash=given["query_hash"], nonce=given["nonce"],
                                    public_key=public_key)  # fmt: skip
    attribution.sign_entry(
        site_key,
        actor_type="site",
        actor_id="https://site.example/",
        query_hash=given["query_hash"],
        nonce=given["nonce"],
        timestamp=given["timestamp"],
    )
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(admit_sql(alias), [secrets.token_urlsafe(16), timezone.now(), [ACTOR], final["interaction_id"]])
        cursor.fetchall()
        cursor.execute(f"UPDATE {table} SET collected = %s::jsonb, updated_at = now() WHERE interaction_id = %s",
                       [json.dumps({"title": final["message"]}), final["interaction_id"]])  # fmt: skip
    return time.perf_counter() - began


def post(handler, path: str, body: dict) -> dict:
    status: list[str] = []
    chunks = b"".join(handler(environ("POST", path, body), lambda s, h, e=None: status.append(s)))
    assert status[0].startswith("200"), (status, chunks[:300])
    return json.loads(chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scifact_arguments(parser, "agent_handshake_bench_intentweb")
    args = parser.parse_args()

    corpus, _queries, config = scifact_site(args.database, args.seed_docs, args.queries)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    from agent_handshake.indexing import index_passages
    from agent_handshake.models import AgentClient, ApiKey, TrustedActorKey

    index_passages(config)
    register_lookup()
    client = Client()
    TrustedActorKey.objects.update_or_create(
        actor_id=ACTOR, defaults={"public_key": b64url(client.key.public_key().public_bytes_raw())}
    )
    handler = WSGIHandler()
    titles = [row["title"][:20] for row in corpus[: args.queries]]
    times: dict[str, list[float]] = {}
    # Only bench_lookup: routing has one capability to choose, so every intent reaches it.
    relaxed = {**lifted_limits(settings.AGENT_HANDSHAKE), "ROUTING_MIN_SCORE": -1.0}
    with override_settings(AGENT_HANDSHAKE=relaxed):
        from agent_handshake.registry import capability_registry

        for capability in list(capability_registry):
            if capability.action_type and capability.name != "bench_lookup":
                del capability_registry._capabilities[capability.name]
        post(handler, "/schema-templates", {"method": "get_schema_template", "params": {"scenario": "bench_lookup"}})
        site_key = Ed25519PrivateKey.generate()
        api_key = ApiKey.objects.issue(AgentClient.objects.get_or_create(name="bench agent")[0], scopes=["*"])[1]
        for number, title in enumerate(titles):
            interaction_id = f"bench-{number}-{secrets.token_hex(4)}"
            first = client.envelope(interaction_id, "intent_request", "Look up a document by its title", None)
            reply = post(handler, "/intent", first)
            assert reply["flow_type"] == "information_request", reply
            final = client.envelope(interaction_id, "information_response", f"title: {title}",
                                    first["attribution"]["query_hash"])  # fmt: skip
            converse = {"ahp": "0.1", "capability": "bench_lookup", "query": f"look up {title}",
                        "context": {"input": {"title": title}}}  # fmt: skip
            structured = {"schema_id": "bench_lookup_v1", "payload": {"title": title}}
            keyed = {"HTTP_AUTHORIZATION": f"Bearer {api_key}", "HTTP_IDEMPOTENCY_KEY": interaction_id}
            doors = [
                ("POST /intent (final turn)", "/intent", final, {}),
                ("POST /agent/converse", "/agent/converse", converse, {}),
                ("POST /schema-templates (structured submission)", "/schema-templates", structured, {}),
                (WRITING, "/agent/converse", converse, keyed),
            ]
            for label, path, body, headers in doors[number % 4 :] + doors[: number % 4]:
                elapsed = timed(handler, {**environ("POST", path, body), **headers})
                if number >= 10:
                    times.setdefault(label, []).append(elapsed)
            elapsed = floor(client, final, site_key)
            if number >= 10:
                times.setdefault(FLOOR, []).append(elapsed)
    from agent_handshake.models import Interaction

    done = Interaction.objects.filter(interaction_id__startswith="bench-", status=Interaction.Status.DONE).count()
    assert done == len(titles), f"{done} of {len(titles)} intents reached execution_result"
    print_table(
        f"bench_lookup (MODE3 query): {len(titles) - 10} inputs, an intent's final turn and a structured submission "
        "against AHP "
        f"({len(corpus):,} SciFact documents, in process)",
        ["request", "p50 ms", "p95 ms", "vs converse p50", "vs keyed converse p50"],
        [
            [*row, f"{pct(times[row[0]], 50) / pct(times[WRITING], 50):.2f}x"]
            for row in rows_of(times, "POST /agent/converse")
        ],
    )
    print(f"(p50 of the final turn: {pct(times['POST /intent (final turn)'], 50)} ms)")
    least = (pct(times["POST /agent/converse"], 50) + pct(times[FLOOR], 50)) / pct(times["POST /agent/converse"], 50)
    print(f"(the closest a final turn can come to the AHP call, (AHP p50 + floor p50) / AHP p50: {least:.2f}x)")


if __name__ == "__main__":
    main()
