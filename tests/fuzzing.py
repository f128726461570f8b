"""Hypothesis strategies for hostile requests, and the invariants every response must keep.

Shared by tests/robustness/test_bad_input.py (a bounded run in the test suite) and bench/bench_fuzz.py (a soak of
10,000+ cases over real HTTP). A :class:`Case` is one request: method, percent-encoded path, headers and body bytes. Two
header values are placeholders filled in when the case is sent, so generated requests can also carry valid credentials:
:data:`VALID_BEARER` (a real API key) and :data:`SIGN` (a real signature of the body).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

CONVERSE = "/agent/converse"
STATUS = "/agent/converse/status/"
MANIFEST = "/.well-known/agent.json"
ASK = "/ask"
AWAIT = "/await"
MCP = "/mcp"
CAPABILITY = "/capabilities/"
INTENT = "/intent"
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Window")
VALID_BEARER = "Bearer {secret}"
SIGN = "{sign}"
#: Not a header: the value the request's environ gets as CONTENT_LENGTH (a client computes the real one).
CONTENT_LENGTH = "CONTENT_LENGTH"
#: AGENT_HANDSHAKE settings for a run of generated requests: they all come from one address, and should reach
#: the code behind the limits rather than be 429s.
LIFTED_LIMITS = {
    "RATE_LIMITS": {"unauthenticated": {"requests": "1000000/minute"}, "authenticated": {"requests": "1000000/minute"}},
    "AGENT_RATE_LIMIT": "1000000/minute",
    "ACTION_RATE_LIMIT": "1000000/minute",
}


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @classmethod
    def converse(cls, body: Any, **headers: str) -> Case:
        return cls("POST", CONVERSE, headers, json.dumps(body).encode())

    def describe(self) -> str:
        return f"{self.method} {self.path} {self.headers!r} {self.body[:300]!r}"


# --- strings --------------------------------------------------------------------------------------------------

#: Characters that broke something once, or could: NUL (PostgreSQL text), lone surrogates (UTF-8), zero-width and
#: bidi controls, quoting and LIKE metacharacters, the markdown separator, non-ASCII digits.
NASTY = ["\x00", "\ud800", "\udfff", "\u200b", "\ufeff", "\u202e", "'", '"', "\\", "%", "_", "\n", "٣", "０"]
nasty_text = st.text(alphabet=st.one_of(st.characters(codec=None), st.sampled_from(NASTY)), max_size=40)
short_text = st.one_of(st.sampled_from([*NASTY, "---", " ", "?!", "ahp_x_y"]), nasty_text)

QUERIES = [
    "How do I brew sencha?",
    "What is hojicha?",
    "Is LK-TEA-0001 in stock?",
    "Where is my order LK-10001, ada@example.com?",
    "Quote 3 x LK-TEA-0001",
    "Book a tea tasting tomorrow at 11:00",
    "shipping",
    "and the second one?",
]
#: The demo site's capabilities besides its human desk (escalate_to_human).
DEMO_CAPABILITIES = (
    "content_search",
    "site_info",
    "contact",
    "check_inventory",
    "order_status",
    "custom_quote",
    "book_appointment",
)
CAPABILITIES = [*DEMO_CAPABILITIES, "compile_report", "get_post"]
TYPES = ["text/answer", "application/data", "application/action-result", "media/video", "text/feed", "x-foo/bar"]
DATES = [
    "2025-01-31",
    "2025-01-31T10:00:00Z",
    "2025-02-30",
    "2025-13-01",
    "2025-01-01T25:00:00",
    "0000-01-01",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "2025-01-01T00:00:00-23:59",
    "٢٠٢٥-٠١-٠١",
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), short_text)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(short_text, children, max_size=4)),
    max_leaves=12,
)


def _or_junk(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the meaningful values, sometimes a hostile string or any JSON value instead."""
    return st.one_of(strategy, strategy, short_text, json_values)


dates = _or_junk(
    st.one_of(
        st.sampled_from(DATES),
        st.from_regex(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([+-]\d{2}:\d{2}|Z)?)?", fullmatch=True),
    )
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "content_types": _or_junk(st.lists(st.sampled_from(TYPES), max_size=3)),
        "sections": _or_junk(st.lists(st.sampled_from(["blog", "Shop", "videos", "pages", "nope"]), max_size=3)),
        "published_after": dates,
        "published_before": dates,
    },
)
capability_input = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "product": _or_junk(st.sampled_from(["Sencha", "LK-TEA-0001", "nothing"])),
            "order_number": _or_junk(st.sampled_from(["LK-10001", "LK-99999"])),
            "email": _or_junk(st.sampled_from(["ada@example.com", "not-an-email"])),
            "items": _or_junk(st.just([{"sku": "LK-TEA-0001", "quantity": 3}])),
            "topic": _or_junk(st.just("tea")),
        },
    ),
    st.dictionaries(short_text, json_values, max_size=4),
)
context = st.fixed_dictionaries(
    {},
    optional={
        "requesting_agent": _or_junk(st.sampled_from(["fuzz-bot", "shared-bot"])),
        "user_intent": _or_junk(st.just("research")),
        "max_tokens": _or_junk(st.integers(min_value=-10, max_value=40000)),
        "accept_types": _or_junk(st.lists(st.sampled_from(TYPES), max_size=3)),
        "callback_url": _or_junk(
            st.sampled_from(["http://127.0.0.1:9/hook", "https://10.0.0.1/x", "http://[::1", "ftp://x", "http://é/"])
        ),
        "locale": _or_junk(st.just("en-GB")),
        "input": _or_junk(capability_input),
        "filters": _or_junk(filters),
    },
)
ahp_bodies = st.fixed_dictionaries(
    {"capability": _or_junk(st.sampled_from(CAPABILITIES)), "query": _or_junk(st.sampled_from(QUERIES))},
    optional={
        "ahp": _or_junk(st.just("0.1")),
        "session_id": _or_junk(st.none()),
        "clarification": _or_junk(st.sampled_from(["blog", "shop", "ada@example.com"])),
        "auth": _or_junk(st.sampled_from([VALID_BEARER, "Bearer ahp_x_y", "Basic Zm9vOmJhcg=="])),
        "context": _or_junk(context),
    },
)


nlweb_query = st.fixed_dictionaries(
    {"text": _or_junk(st.sampled_from(QUERIES))},
    optional={
        "itemType": _or_junk(st.sampled_from(["Product", "VideoObject", "Recipe", ""])),
        "price": _or_junk(st.sampled_from(["less than $20", "$10-$30", "over 5", "12.5", "cheap", "-3"])),
        "datePublished": dates,
        "datePublishedAfter": dates,
        "site": _or_junk(st.just("example.com")),
        "capability": _or_junk(st.sampled_from(CAPABILITIES)),
        "input": _or_junk(capability_input),
    },
)
nlweb_bodies = st.fixed_dictionaries(
    {"query": _or_junk(nlweb_query)},
    optional={
        "context": _or_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "prev": _or_junk(st.lists(st.sampled_from(QUERIES), max_size=3)),
                    "memory": _or_junk(st.one_of(st.just("vegetarian"), st.lists(short_text, max_size=3))),
                    "text": _or_junk(short_text),
                    "@type": _or_junk(st.just("ConversationalContext")),
                },
            )
        ),
        "prefer": _or_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "streaming": _or_junk(st.booleans()),
                    "response_format": _or_junk(st.sampled_from(["conv_search", "chatgpt_app", "other"])),
                    "mode": _or_junk(st.sampled_from(["list", "summarize", "detailed"])),
                    "accept-language": _or_junk(st.just("en")),
                },
            )
        ),
        "meta": _or_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "api_version": _or_junk(st.just("0.54")),
                    "version": _or_junk(st.just("0.54")),
                    "session_context": _or_junk(st.fixed_dictionaries({"conversation_id": _or_junk(short_text)})),
                },
            )
        ),
    },
)
await_bodies = st.fixed_dictionaries(
    {"promise_token": _or_junk(short_text)},
    optional={"action": _or_junk(st.sampled_from(["checkin", "cancel", "CANCEL", "explode"])), "meta": json_values},
)

mcp_arguments = st.fixed_dictionaries(
    {},
    optional={
        "query": _or_junk(st.sampled_from(QUERIES)),
        "session_id": _or_junk(short_text),
        "product": _or_junk(st.just("LK-TEA-0001")),
        "job_id": _or_junk(short_text),
    },
)
mcp_meta = st.fixed_dictionaries(
    {},
    optional={
        "auth": _or_junk(st.sampled_from([VALID_BEARER, "ahp_x_y", "Bearer "])),
        "io.modelcontextprotocol/protocolVersion": _or_junk(st.sampled_from(["2026-07-28", "2025-06-18", "1.0"])),
        "io.modelcontextprotocol/clientCapabilities": _or_junk(st.just({})),
    },
)
mcp_message = st.fixed_dictionaries(
    {"jsonrpc": _or_junk(st.just("2.0")), "method": _or_junk(st.sampled_from(
        ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read", "server/discover",
         "notifications/initialized", "prompts/list"]))},
    optional={
        "id": _or_junk(st.one_of(st.integers(), short_text)),
        "params": _or_junk(st.fixed_dictionaries({}, optional={
            "name": _or_junk(st.sampled_from([*CAPABILITIES, "ask", "job_status", "rm"])),
            "arguments": _or_junk(mcp_arguments),
            "uri": _or_junk(st.sampled_from(["http://testserver/llms.txt", "http://127.0.0.1:1/", "file:///etc/passwd"])),
            "cursor": _or_junk(short_text),
            "protocolVersion": _or_junk(st.sampled_from(["2024-11-05", "2025-11-25", "x"])),
            "_meta": _or_junk(mcp_meta),
        })),
    },
)  # fmt: skip


def deep(depth: int) -> bytes:
    """A small body with ``depth`` nested arrays in context.input (1,200 levels is under 2.5 KB)."""
    nested = b"[" * depth + b"]" * depth
    return b'{"capability":"content_search","query":"tea","context":{"input":{"x":' + nested + b"}}}"


bodies = st.one_of(
    ahp_bodies.map(lambda body: json.dumps(body).encode()),
    ahp_bodies.map(lambda body: json.dumps(body).encode()),
    ahp_bodies.map(lambda body: json.dumps(body).encode()),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.integers(min_value=20, max_value=3000).map(deep),
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"NaN", b'{"capability": NaN, "query": Infinity}', b"\xef\xbb\xbf{}", b"1" * 5000]),
)

# --- headers --------------------------------------------------------------------------------------------------

header_text = st.text(alphabet=st.one_of(st.characters(codec="latin-1"), st.sampled_from(NASTY)), max_size=60)
credentials = st.one_of(
    st.just({}),
    st.just({}),
    st.fixed_dictionaries({"Authorization": st.sampled_from([VALID_BEARER, "Bearer ahp_ab_cd", "Bearer "])}),
    st.fixed_dictionaries({"Authorization": header_text.map(lambda value: "Bearer " + value)}),
    st.fixed_dictionaries({"X-AHP-Key": st.one_of(header_text, st.just("ahp_ab_cd"))}),
    st.just({"X-AHP-Signature": SIGN}),
    st.fixed_dictionaries(
        {"X-AHP-Signature": st.one_of(st.just(SIGN), header_text.map(lambda value: "v1=" + value))},
        optional={
            "X-AHP-Key-Id": header_text,
            "X-AHP-Timestamp": st.one_of(
                header_text, st.integers().map(str), st.just("1" + "0" * 400), st.just("١٧٠٠٠٠٠٠٠٠")
            ),
        },
    ),
)
other_headers = st.fixed_dictionaries(
    {},
    optional={
        "Accept": st.one_of(
            st.sampled_from(["application/json", "text/markdown", "application/agent+json", "*/*;q=0", "text/*"]),
            header_text,
        ),
        "Content-Type": st.one_of(
            st.sampled_from(["application/json", "text/plain", "multipart/form-data; boundary=x"]), header_text
        ),
        CONTENT_LENGTH: st.one_of(st.sampled_from(["abc", "-5", "1e3", "", "99999999999999999999"]), header_text),
        "Idempotency-Key": st.one_of(st.just("fuzz-1"), header_text),
        "If-None-Match": header_text,
        "If-Modified-Since": st.one_of(st.just("Wed, 21 Oct 2015 07:28:00 GMT"), header_text),
        "Accept-Encoding": st.sampled_from(["gzip", "br", "identity;q=0", "*"]),
        "X-Forwarded-For": st.one_of(
            st.sampled_from(["203.0.113.9", "2001:db8::1, 10.0.0.1", "[::1]:80", "1.2.3.4:5", "fe80::1%eth0"]),
            header_text,
        ),
    },
)
headers = st.builds(lambda a, b: {**a, **b}, credentials, other_headers)

# --- paths ----------------------------------------------------------------------------------------------------

segment = st.one_of(
    st.sampled_from(["%00", "x%00", "%ED%A0%80", "%FF", "%C0%80", "%2F", "..", "hojicha-roasted-green-tea"]),
    st.text(alphabet=st.one_of(st.characters(codec=None), st.sampled_from(NASTY)), min_size=1, max_size=20).map(
        lambda text: quote(text.encode("utf-8", "surrogatepass"), safe="")
    ),
)
paths = st.one_of(
    st.sampled_from([MANIFEST, "/llms.txt", "/llms-full.txt", "/robots.txt", CONVERSE, "/blog/"]),
    segment.map(lambda s: STATUS + s),
    segment.map(lambda s: f"/blog/{s}.md"),
    segment.map(lambda s: f"/blog/{s}/"),
    segment.map(lambda s: f"/{s}"),
    segment.map(lambda s: f"/{s}.md"),
)
methods = st.sampled_from(["GET", "GET", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])


def converse_cases() -> st.SearchStrategy[Case]:
    """POST /agent/converse with generated bodies and headers."""
    return st.builds(lambda body, hdrs: Case("POST", CONVERSE, hdrs, body), bodies, headers)


def other_cases() -> st.SearchStrategy[Case]:
    """Any method on the app's other URLs and on pages of the site, with generated paths and headers."""
    return st.builds(
        lambda method, path, hdrs, body: Case(method, path, hdrs, body if method in ("POST", "PUT", "PATCH") else b""),
        methods,
        paths,
        headers,
        st.one_of(st.just(b""), st.just(b"{}"), st.binary(max_size=50)),
    )


def nlweb_cases() -> st.SearchStrategy[Case]:
    """POST /ask and /await with generated NLWeb bodies (or any bytes) and headers."""
    encoded = st.one_of(
        nlweb_bodies.map(lambda body: json.dumps(body).encode()),
        nlweb_bodies.map(lambda body: json.dumps(body).encode()),
        bodies,
    )
    return st.one_of(
        st.builds(lambda body, hdrs: Case("POST", ASK, hdrs, body), encoded, headers),
        st.builds(lambda body, hdrs: Case("POST", AWAIT, hdrs, json.dumps(body).encode()), await_bodies, headers),
    )


def _now(offset: int = 0) -> str:
    import datetime

    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


FLOWS = ["intent_request", "information_request", "information_response", "clarification_request",
         "execution_result", "error", "shout"]  # fmt: skip
#: Drawn when the example is generated (a timestamp fixed at import would be stale by the time it is sent).
fresh_times = st.one_of(
    st.integers(-30, 30).map(_now), st.sampled_from(["yesterday", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00"])
)
chain_entries = st.fixed_dictionaries(
    {
        "actor_type": _or_junk(st.sampled_from(["ai_agent", "ai_gateway"])),
        "actor_id": _or_junk(st.sampled_from(["https://agent.example/a", "agent-1"])),
        "timestamp": fresh_times,
        "signature": _or_junk(st.sampled_from(["", "AAAA", "x" * 86])),
    }
)
intent_bodies = st.fixed_dictionaries(
    {
        "protocol_version": _or_junk(st.sampled_from(["1.0", "1.1", "2.0"])),
        "flow_type": _or_junk(st.sampled_from(FLOWS)),
        "message": _or_junk(st.sampled_from(QUERIES)),
        "interaction_id": _or_junk(st.sampled_from(["conv-1", "conv-2"])),
        "attribution": st.fixed_dictionaries(
            {
                "query_hash": _or_junk(st.sampled_from(["0" * 64, "f" * 64])),
                "nonce": st.one_of(st.uuids().map(str), short_text),
                "timestamp": fresh_times,
                "chain": _or_junk(st.lists(chain_entries, max_size=3)),
            }
        ),
    },
    optional={
        "collected_information": _or_junk(capability_input),
        "callback_url": _or_junk(st.sampled_from(["https://example.com/cb", "http://127.0.0.1/x"])),
        "locale": short_text,
        "explicability": json_values,
    },
)


def intent_cases() -> st.SearchStrategy[Case]:
    """POST /intent with generated IntentWeb envelopes (or any bytes) and headers."""
    encoded = st.one_of(intent_bodies.map(lambda body: json.dumps(body).encode()), bodies)
    return st.builds(lambda body, hdrs: Case("POST", INTENT, hdrs, body), encoded, headers)


def mcp_cases() -> st.SearchStrategy[Case]:
    """POST /mcp with generated JSON-RPC messages and batches (or any bytes), and POST /capabilities/<name> with
    generated flat bodies, with generated headers."""
    mcp_headers = st.fixed_dictionaries(
        {},
        optional={
            "MCP-Protocol-Version": st.sampled_from(["2025-06-18", "2026-07-28", "bogus"]),
            "Mcp-Method": st.sampled_from(["tools/call", "x"]),
            "Origin": st.sampled_from(["http://testserver", "http://evil.example", "null"]),
            "Mcp-Name": st.sampled_from(["content_search", "=?base64?Y29udGVudF9zZWFyY2g=?=", "=?base64?!?="]),
        },
    )
    encoded = st.one_of(
        mcp_message.map(lambda message: json.dumps(message).encode()),
        st.lists(mcp_message, min_size=0, max_size=25).map(lambda batch: json.dumps(batch).encode()),
        bodies,
    )
    flat = st.fixed_dictionaries({}, optional={"query": _or_junk(st.sampled_from(QUERIES)),
                                               "product": _or_junk(st.just("LK-TEA-0001")),
                                               "context": _or_junk(context), "junk": json_values})  # fmt: skip
    return st.one_of(
        st.builds(lambda body, hdrs, more: Case("POST", MCP, {**hdrs, **more}, body), encoded, headers, mcp_headers),
        st.builds(
            lambda name, body, hdrs: Case("POST", CAPABILITY + name, hdrs, json.dumps(body).encode()),
            st.sampled_from([*CAPABILITIES, "nope"]),
            flat,
            headers,
        ),
    )


def all_cases() -> st.SearchStrategy[Case]:
    return st.one_of(converse_cases(), nlweb_cases(), mcp_cases(), other_cases())


def run(strategy: st.SearchStrategy[Case], count: int, check: Callable[[Case], None], *, random_seed: int) -> None:
    """Call ``check`` on ``count`` generated cases (a seeded run: no shrinking, no example database)."""

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(random_seed)
    @given(strategy)
    def each(case: Case) -> None:
        check(case)

    each()


# --- sending and checking -------------------------------------------------------------------------------------


def resolve(case: Case, secret: str) -> dict[str, str]:
    """The case's headers with the placeholders replaced: a real bearer token, a real signature of the body."""
    from agent_handshake.identity.auth import sign_request

    resolved = {name: value.replace(VALID_BEARER, f"Bearer {secret}") for name, value in case.headers.items()}
    if resolved.get("X-AHP-Signature") == SIGN:
        signed = sign_request(secret, case.method, case.path, case.body)
        resolved = {**signed, **{k: v for k, v in resolved.items() if k not in signed and k != "X-AHP-Signature"}}
    return resolved


def send_django(client: Any, case: Case, secret: str) -> tuple[int, str, dict[str, str], bytes]:
    """Send ``case`` through Django's test client: (status, content type, headers, body)."""
    hdrs = resolve(case, secret)
    extra = {CONTENT_LENGTH: hdrs.pop(CONTENT_LENGTH)} if CONTENT_LENGTH in hdrs else {}
    content_type = hdrs.pop("Content-Type", "application/json")
    response = client.generic(case.method, case.path, case.body, content_type, headers=hdrs, **extra)
    # The client closes the response itself (for a streamed one, once it is read): closing it again here would
    # send request_finished, whose handler closes the database connection of the test's transaction.
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, response.get("Content-Type", ""), dict(response.headers), body


SCHEMA_TEMPLATES = "/schema-templates"
HANDSHAKE = "/agent/handshake"
SCENARIOS = ["book_appointment", "check_inventory", "order_status", "custom_quote", "escalate_to_human", "nope"]
template_payloads = st.fixed_dictionaries(
    {},
    optional={"product": _or_junk(st.just("LK-TEA-0001")), "service": _or_junk(st.just("tea-tasting")),
              "date": _or_junk(st.sampled_from(["2026-12-01", "2026-02-30", "tomorrow"])),
              "time": _or_junk(st.just("11:00")), "name": _or_junk(st.just("Ada")),
              "email": _or_junk(st.just("ada@example.com")), "party_size": _or_junk(st.integers(-3, 9)),
              "other": _or_junk(nasty_text), "junk": json_values},
)  # fmt: skip
schema_template_bodies = st.one_of(
    st.fixed_dictionaries(
        {"method": _or_junk(st.just("get_schema_template"))},
        optional={"params": _or_junk(st.fixed_dictionaries(
            {"scenario": _or_junk(st.sampled_from(SCENARIOS))},
            optional={"preferred_language": _or_junk(st.sampled_from(["fr", "en-US", "x" * 40]))}))},
    ),
    st.fixed_dictionaries(
        {"schema_id": _or_junk(st.sampled_from([f"{name}_v1" for name in SCENARIOS] + ["x_v0", "x_v99999999999"]))},
        optional={"payload": _or_junk(template_payloads), "callback_url": _or_junk(st.just("https://a.example/h")),
                  "extra": json_values},
    ),
)  # fmt: skip
b64_32 = st.binary(min_size=32, max_size=32).map(lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode())
handshake_bodies = st.fixed_dictionaries(
    {},
    optional={"did": _or_junk(st.just("did:agent-semantic-protocol:" + "0" * 64)), "public_key": _or_junk(b64_32),
              "challenge": _or_junk(b64_32), "agent_id": short_text, "capabilities": _or_junk(st.just(["a"])),
              "timestamp": json_values, "handshake_id": short_text, "challenge_response": _or_junk(b64_32)},
)  # fmt: skip


def _template_path(name: str) -> str:
    return f"{SCHEMA_TEMPLATES}/{quote(name.encode('utf-8', 'surrogatepass'), safe='')}"


def schema_template_cases() -> st.SearchStrategy[Case]:
    """GET /schema-templates/<scenario> and POST /schema-templates (the draft's method, structured submissions, or
    any bytes), and POST /agent/handshake and /verify with generated bodies, with generated headers."""
    posted = st.one_of(schema_template_bodies.map(lambda body: json.dumps(body).encode()), bodies)
    shaken = st.one_of(handshake_bodies.map(lambda body: json.dumps(body).encode()), bodies)
    names = st.one_of(st.sampled_from(SCENARIOS), short_text)
    handshakes = st.sampled_from([HANDSHAKE, HANDSHAKE + "/verify"])
    return st.one_of(
        st.builds(lambda body, hdrs: Case("POST", SCHEMA_TEMPLATES, hdrs, body), posted, headers),
        st.builds(lambda name, hdrs: Case("GET", _template_path(name), hdrs, b""), names, headers),
        st.builds(lambda path, body, hdrs: Case("POST", path, hdrs, body), handshakes, shaken, headers),
    )


def endpoint(path: str) -> str | None:
    """Which AHP endpoint a percent-encoded path reaches: "converse", "status", "manifest" or None."""
    decoded = unquote(path.split("?")[0])
    if decoded in (HANDSHAKE, HANDSHAKE + "/verify"):
        return "converse"
    if re.fullmatch(re.escape(SCHEMA_TEMPLATES) + r"(/[^/]+)?", decoded):
        return "schema_templates"
    if decoded == CONVERSE:
        return "converse"
    if re.fullmatch(re.escape(STATUS) + r"[^/]+", decoded):
        return "status"
    if decoded == MANIFEST:
        return "manifest"
    if decoded in (ASK, AWAIT):
        return "nlweb"
    if decoded == MCP or re.fullmatch(re.escape(CAPABILITY) + r"[^/]+", decoded):
        return "mcp" if decoded == MCP else "converse"
    if decoded == INTENT:
        return "intent"
    return None


def problems(case: Case, status: int, content_type: str, hdrs: dict[str, str], body: bytes) -> list[str]:
    """What is wrong with a response: a 5xx; from an AHP endpoint, a body that is not JSON (an empty body is
    fine on a success, a 304 or an answer to HEAD) or, from /agent/converse and the status URL, a missing
    X-RateLimit-* header."""
    found = []
    if status >= 500:
        found.append(f"status {status}")
    kind = endpoint(case.path)
    if kind is None:
        return found
    if body and {name.lower(): value for name, value in hdrs.items()}.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    streamed = kind == "nlweb" and status == 200 and content_type.startswith("text/event-stream")
    if streamed:
        if b"event: end" not in body:
            found.append("an event stream without its end event")
    elif body or (status >= 400 and case.method != "HEAD"):
        if content_type.split(";")[0].strip() != "application/json":
            found.append(f"Content-Type {content_type!r}")
        else:
            try:
                json.loads(body)
            except ValueError:
                found.append("a body that is not JSON")
    if kind in ("converse", "status", "nlweb", "mcp", "intent"):
        missing = [name for name in RATE_HEADERS if name not in hdrs]
        if missing:
            found.append(f"no {', '.join(missing)}")
    return found
