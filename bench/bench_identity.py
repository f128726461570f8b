"""Verified agents: what the DID handshake costs, and a MODE2 question asked with a DID session credential against
the same question asked with an API key, in one run.

Set-up as bench_mcp_openapi.py (SciFact documents indexed by the app, limits lifted, the Django WSGI handler in
process). The agent is written here from the README (hashlib and cryptography, not the server's helpers). Timed:

- the handshake, both requests (``POST /agent/handshake`` then ``/verify``): the site's checks, its signature and
  its challenge, then the agent's signature checked, the handshake spent and the session credential issued (the
  agent's own signing happens before the clock starts);
- ``POST /agent/converse`` (``content_search``) with ``Authorization: Bearer <API key>`` and with
  ``Authorization: Bearer <DID session credential>``, alternating, the same questions: the credential's lookup,
  the tier's scopes and limits, and the trust update with its history row are the difference. Target: within 1.1x.

    python bench/bench_identity.py [--seed-docs 1500] [--queries 100]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import time

from bench_converse import scifact_site
from bench_mcp_openapi import environ, pct, rows_of, timed
from common import lifted_limits, print_table, scifact_arguments
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

DOMAIN = b"agent-handshake/asp-handshake/v1"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def call(handler, path: str, body: dict, token: str | None = None) -> dict:
    env = environ("POST", path, body)
    if token:
        env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    status: list[str] = []
    chunks = b"".join(handler(env, lambda s, h, e=None: status.append(s)))
    assert status[0].startswith("200"), (status, chunks[:300])
    return json.loads(chunks)


def handshake_times(handler, rounds: int) -> tuple[list[float], str]:
    """``rounds`` handshakes of new agents; their times and the last one's credential."""
    times, token = [], ""
    for _ in range(rounds):
        key = Ed25519PrivateKey.generate()
        public = key.public_key().public_bytes_raw()
        did = "did:agent-semantic-protocol:" + hashlib.sha256(public).hexdigest()
        hello = {"did": did, "public_key": b64url(public), "challenge": b64url(secrets.token_bytes(32)),
                 "timestamp": int(time.time())}  # fmt: skip
        began = time.perf_counter()
        answer = call(handler, "/agent/handshake", hello)
        first = time.perf_counter() - began
        signed = b"\x00".join([DOMAIN, b"initiator", did.encode(), answer["did"].encode(),
                               unb64url(answer["challenge"])])  # fmt: skip
        verify = {"handshake_id": answer["handshake_id"], "did": did, "challenge_response": b64url(key.sign(signed))}
        began = time.perf_counter()
        token = call(handler, "/agent/handshake/verify", verify)["access_token"]
        times.append(first + time.perf_counter() - began)
    return times, token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scifact_arguments(parser, "agent_handshake_bench_identity")
    parser.add_argument("--handshakes", type=int, default=100)
    args = parser.parse_args()

    _corpus, queries, config = scifact_site(args.database, args.seed_docs, args.queries)
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    from agent_handshake.indexing import index_passages
    from agent_handshake.models import AgentClient, ApiKey, TrustEvent, VerifiedAgent

    index_passages(config)
    handler = WSGIHandler()
    unlimited = {"requests": "1000000/minute", "token_budget": "5000000/session"}
    relaxed = {**lifted_limits(settings.AGENT_HANDSHAKE),
               "RATE_LIMITS": {"unauthenticated": unlimited, "authenticated": unlimited}}  # fmt: skip
    with override_settings(AGENT_HANDSHAKE=relaxed):
        handshakes, did_token = handshake_times(handler, args.handshakes)
        client, _ = AgentClient.objects.get_or_create(name="bench agent")
        api_key = ApiKey.objects.issue(client, scopes=["*"])[1]
        times: dict[str, list[float]] = {}
        doors = [("API key", api_key), ("DID session credential", did_token)]
        for number, query in enumerate(queries):
            body = {"ahp": "0.1", "capability": "content_search", "query": query}
            for label, token in doors[number % 2 :] + doors[: number % 2]:
                env = environ("POST", "/agent/converse", body)
                env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
                elapsed = timed(handler, env)
                if number >= 10:
                    times.setdefault(f"POST /agent/converse, {label}", []).append(elapsed)
    agent = VerifiedAgent.objects.order_by("-last_seen_at").first()
    recorded = TrustEvent.objects.filter(agent=agent).count()
    assert recorded == len(queries), f"{recorded} trust events for {len(queries)} requests"
    print_table(
        f"content_search, {len(queries) - 10} questions with each credential ({args.seed_docs:,} SciFact documents, "
        "in process)",
        ["request", "p50 ms", "p95 ms", "vs API key p50"],
        rows_of(times, "POST /agent/converse, API key"),
    )
    print(f"\nHandshake (both requests, server side), {args.handshakes} new agents: p50 {pct(handshakes, 50)} ms, "
          f"p95 {pct(handshakes, 95)} ms")  # fmt: skip


if __name__ == "__main__":
    main()
