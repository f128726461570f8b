"""Bad input gets a 4xx, never a 5xx nor an HTML error page (issue 9, §1).

First one plain test per class of hostile input, then a property-based test (hypothesis) that sends generated
bodies, headers and paths through the whole stack (middleware, CSRF, views) and checks the invariants: no 5xx,
AHP endpoints answer JSON, and /agent/converse and the job status URL always carry the four X-RateLimit-*
headers. bench/bench_fuzz.py runs the same strategies for a longer soak.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
from django.db import transaction
from django.test import Client, override_settings
from hypothesis import HealthCheck, example, given, settings

from agent_handshake.identity.auth import sign_request
from agent_handshake.models import AgentClient, ApiKey
from tests import fuzzing

pytestmark = pytest.mark.django_db

CONVERSE = "/agent/converse"
STATUS = "/agent/converse/status/"
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Window")


@pytest.fixture
def secret():
    agent, _ = AgentClient.objects.get_or_create(name="Robustness")
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def post(client, body, **headers):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(CONVERSE, data=data, content_type="application/json", headers=headers)


def assert_ahp_error(response, status, code=None):
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "error"
    if code:
        assert body["code"] == code, body
    return body


def assert_rate_headers(response):
    assert all(name in response for name in RATE_HEADERS), dict(response.headers)


# --- strings PostgreSQL cannot store or UTF-8 cannot encode -------------------------------------------------------


def place(path, value):
    """A valid content_search body (or check_inventory, for context.input) with ``value`` at ``path``."""
    body = {"ahp": "0.1", "capability": "content_search", "query": "How do I brew sencha?"}
    if path.startswith("context.input"):
        body.update(capability="check_inventory", query="Is it in stock?", context={"input": {"product": "Sencha"}})
    target, *rest = path.split(".")
    node = body
    while rest:
        node = node.setdefault(target, {})
        target, *rest = rest
    node[target] = value
    return body


PLACES = [
    "query",
    "session_id",
    "clarification",
    "auth",
    "context.requesting_agent",
    "context.user_intent",
    "context.locale",
    "context.input.product",
    "context.input.nested.deeper",
    "context.filters.sections",
]


@pytest.mark.parametrize("bad", ["\x00", chr(0xD800), chr(0xDFFF)], ids=["nul", "high-surrogate", "low-surrogate"])
@pytest.mark.parametrize("where", PLACES)
def test_unstorable_characters_anywhere_in_the_body_are_a_400(client, demo_content, where, bad):
    value = f"Bearer ahp_ab{bad}_cd" if where == "auth" else f"sen{bad}cha"
    if where == "context.filters.sections":
        value = [value]
    response = post(client, place(where, value))
    body = assert_ahp_error(response, 400, "invalid_request")
    assert body["fields"] == [where if where != "context.filters.sections" else "context.filters.sections.0"]
    assert_rate_headers(response)


def test_unstorable_characters_in_a_key_name_are_a_400(client, demo_content):
    body = place("context.input.product", "Sencha")
    body["context"]["input"]["pro\x00duct"] = "x"
    assert_ahp_error(post(client, body), 400, "invalid_request")


def test_nul_in_the_job_status_path_is_a_400(client, secret):
    response = client.get(STATUS + "job%00id", headers={"Authorization": f"Bearer {secret}"})
    body = assert_ahp_error(response, 400, "invalid_request")
    assert "session_id" in body["message"]
    assert_rate_headers(response)


@pytest.mark.parametrize("slash", ["%2F", "/", "%0A", "%0D%0A"])
def test_a_slash_in_an_id_gets_the_protocol_error_not_the_site_404(client, secret, slash):
    """An id or name with a slash or a line break in it (an encoded one is decoded before routing) reaches the app's
    own view, which answers in its protocol's JSON, instead of falling through to the site's HTML 404."""
    status = client.get(STATUS + f"job{slash}id", headers={"Authorization": f"Bearer {secret}"})
    assert assert_ahp_error(status, 404)["reason"] == "unknown_session"
    assert_rate_headers(status)
    capability = client.post(f"/capabilities/check{slash}inventory", data="{}", content_type="application/json")
    assert_ahp_error(capability, 404, "unknown_capability")
    template = client.get(f"/schema-templates/check{slash}inventory")
    assert template.status_code == 404
    assert template["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_numbers_json_does_not_have_are_refused_by_every_door(client, secret, number):
    """Python's parser reads NaN, Infinity and 1e400 (as infinity); RFC 8259 has none of them, a schema's number type
    takes them and PostgreSQL stores none: each door refuses them as it refuses any body that is not JSON."""
    body = f'{{"capability": "content_search", "query": "tea", "context": {{"max_tokens": {number}}}}}'
    body = assert_ahp_error(post(client, body), 400, "invalid_request")
    assert "not valid JSON" in body["message"]
    nlweb = client.post("/ask", f'{{"query": {{"text": "tea", "price": {number}}}}}', content_type="application/json")
    assert nlweb.status_code == 400
    assert nlweb.json()["_meta"]["response_type"] == "failure"
    mcp = client.post(
        "/mcp",
        f'{{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {{"x": {number}}}}}',
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 400
    assert mcp.json()["error"]["code"] == -32700  # Parse error


# --- dates ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "2025-02-30",
        "2025-13-01",
        "2025-01-01T25:00:00",
        "0000-01-01",
        "2025-01-01T00:00:00-23:59",
        "2025-01-01T00:00:00+16:00",
        "0001-01-01T00:00:00+05:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-05:00",  # after year 9999 in UTC
        "２０２５-０１-０１",  # fullwidth digits
        "٢٠٢٥-٠١-٠١",  # Arabic-Indic digits
        "2025-01-01T00:00:00.٥",
    ],
)
@pytest.mark.parametrize("name", ["published_after", "published_before"])
def test_impossible_dates_are_a_400_naming_the_field(client, demo_content, name, value):
    response = post(client, place(f"context.filters.{name}", value))
    body = assert_ahp_error(response, 400, "invalid_request")
    assert body["fields"] == [f"context.filters.{name}"]
    assert f"context.filters.{name}" in body["message"]


@pytest.mark.parametrize("value", ["2025-01-31", "2025-01-31T23:59:59", "2025-01-31T10:00:00+14:00", "2025-01-31Z"])
def test_real_dates_still_filter(client, demo_content, value):
    if value.endswith("Z") and "T" not in value:
        value = value[:-1]
    response = post(client, place("context.filters.published_after", value))
    assert response.status_code == 200, response.json()


# --- nesting ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [40, 1200, 3000])
def test_deeply_nested_json_is_a_400(client, demo_content, depth):
    inner = "[" * depth + "]" * depth
    raw = '{"capability": "check_inventory", "query": "Sencha?", "context": {"input": {"product": ' + inner + "}}}"
    assert len(raw) < 8192
    body = assert_ahp_error(post(client, raw), 400, "invalid_request")
    assert "deep" in body["message"]


def test_deeply_nested_top_level_is_a_400(client):
    assert_ahp_error(post(client, "[" * 4000 + "]" * 4000), 400, "invalid_request")


# --- queries with nothing to search for ---------------------------------------------------------------------


@pytest.mark.parametrize("query", [" ", "\t\n ", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", "?!", "...", "¿¡ — ‽"])
def test_a_query_with_no_letter_or_digit_is_a_400(client, demo_content, query):
    body = assert_ahp_error(post(client, place("query", query)), 400, "invalid_request")
    assert body["fields"] == ["query"]


@pytest.mark.parametrize("query", ["茶", "42", "Ω?"])
def test_a_query_with_one_letter_or_digit_is_answered(client, demo_content, query):
    assert post(client, place("query", query)).status_code == 200


# --- credentials in headers ---------------------------------------------------------------------------------


def signed(secret, **changes):
    payload = json.dumps(place("query", "How do I brew sencha?")).encode()
    headers = sign_request(secret, "POST", CONVERSE, payload)
    headers.update(changes)
    return payload, headers


@pytest.mark.parametrize(
    "changes",
    [
        {"X-AHP-Timestamp": "1" + "0" * 400},
        {"X-AHP-Timestamp": "-" + "9" * 400},
        {"X-AHP-Timestamp": "١٧٠٠٠٠٠٠٠٠"},
        {"X-AHP-Timestamp": "1_700_000_000"},
        {"X-AHP-Timestamp": "nan"},
        {"X-AHP-Signature": "v1=" + "é" * 64},
        {"X-AHP-Signature": "v1=" + "\x00" * 64},
        {"X-AHP-Key-Id": "ab\x00cd"},
        {"X-AHP-Key-Id": "ab\udc80cd"},
        {"X-AHP-Key-Id": "é" * 40},
    ],
    ids=repr,
)
def test_malformed_signed_requests_are_a_401(client, secret, changes):
    payload, headers = signed(secret, **changes)
    response = post(client, payload, **headers)
    assert_ahp_error(response, 401, "auth_required")
    assert response["WWW-Authenticate"]
    assert_rate_headers(response)


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer ahp_ab\x00cd_ef"},
        {"Authorization": "Bearer ahp_ab\udc80_ef"},
        {"Authorization": "Bearer ahp_é_ü"},
        {"X-AHP-Key": "ahp_ab\x00cd_ef"},
        {"X-AHP-Key": "ahp_ab\udc80_ef"},
        {"X-AHP-Key": "ahp_é_ü"},
    ],
    ids=repr,
)
def test_malformed_secrets_are_a_401(client, headers):
    response = post(client, place("query", "How do I brew sencha?"), **headers)
    assert_ahp_error(response, 401, "auth_required")
    assert_rate_headers(response)


def test_a_valid_signed_request_still_passes(client, demo_content, secret):
    payload, headers = signed(secret)
    assert post(client, payload, **headers).status_code == 200


def test_malformed_credentials_on_the_status_url_are_a_401(client, secret):
    _, headers = signed(secret, **{"X-AHP-Timestamp": "1" + "0" * 400})
    for attempt in (headers, {"Authorization": "Bearer ahp_ab\x00cd_ef"}, {"X-AHP-Key": "ahp_\udc80_x"}):
        response = client.get(STATUS + "some-job", headers=attempt)
        assert_ahp_error(response, 401, "auth_required")
        assert_rate_headers(response)


# --- MODE3 headers and input --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["abc\x00def", "abc\ndef", "ключ"], ids=repr)
def test_an_idempotency_key_that_is_not_printable_ascii_is_a_400(client, demo_content, secret, key):
    body = place("context.input.product", "Sencha")
    response = post(client, body, **{"Authorization": f"Bearer {secret}", "Idempotency-Key": key})
    body = assert_ahp_error(response, 400, "invalid_request")
    assert "Idempotency-Key" in body["message"]


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://127.0.0.1:99999/x", "https://exa\x00mple.com/", "http://é.com/"]
)
def test_malformed_callback_urls_are_a_400(client, secret, url):
    body = {"capability": "compile_report", "query": "A report", "context": {"input": {"topic": "tea"}}}
    body["context"]["callback_url"] = url
    body = assert_ahp_error(post(client, body, Authorization=f"Bearer {secret}"), 400, "invalid_request")
    assert body["fields"] == ["context.callback_url"]


# --- Content-Length -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", " "])
def test_a_malformed_content_length_is_a_400(client, length):
    response = client.post(
        CONVERSE, data=json.dumps(place("query", "sencha")), content_type="application/json", CONTENT_LENGTH=length
    )
    assert_ahp_error(response, 400, "invalid_request")
    assert_rate_headers(response)


@pytest.mark.django_db(transaction=True)
def test_a_malformed_content_length_over_http_is_a_400(live_server):
    """Over a real socket to Django's server (what runserver and `make demo` use), which passes the header on."""
    conn = http.client.HTTPConnection(urlsplit(live_server.url).hostname, urlsplit(live_server.url).port, timeout=10)
    body = json.dumps(place("query", "sencha")).encode()
    conn.request("POST", CONVERSE, body, {"Content-Type": "application/json", "Content-Length": "abc"})
    response = conn.getresponse()
    assert response.status == 400
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(response.read())["code"] == "invalid_request"
    assert all(response.getheader(name) for name in RATE_HEADERS)
    conn.close()


# --- wrong methods: JSON 405, not the CSRF page -------------------------------------------------------------


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize(
    "path", ["/.well-known/agent.json", "/llms.txt", "/llms-full.txt", "/robots.txt", STATUS + "some-job"]
)
def test_wrong_methods_on_read_only_urls_are_a_json_405(path, method):
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(path, data="{}", content_type="application/json")
    body = assert_ahp_error(response, 405, "method_not_allowed")
    assert response["Allow"] == ", ".join(body["allowed_methods"])
    assert "GET" in response["Allow"]


def test_converse_still_refuses_get_with_json():
    response = Client(enforce_csrf_checks=True).get(CONVERSE)
    assert_ahp_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST, OPTIONS"


# --- the discovery middleware -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/blog/x%00.md", {}),
        ("/blog/x%00/", {"Accept": "text/markdown"}),
        ("/%00", {"Accept": "text/markdown"}),
        ("/blog/%00%00.md", {"Accept": "application/agent+json;q=0, text/markdown"}),
    ],
)
def test_a_nul_in_the_path_has_no_markdown_version(client, demo_content, path, headers):
    response = client.get(path, headers=headers)
    assert response.status_code == 404
    assert "agent-manifest" in response["Link"]


# --- the property: generated requests ---------------------------------------------------------------------------

ROBUST_SETTINGS = {
    **fuzzing.LIFTED_LIMITS,
    "INDEX_ON_SAVE": "sync",
    "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.1/32"],
    "CALLBACK_REQUIRE_HTTPS": False,
    "SERVE_ROBOTS_TXT": True,
    "TRUSTED_PROXY_COUNT": 1,  # so the generated X-Forwarded-For headers are read
}


def check(case: fuzzing.Case, secret: str) -> None:
    # Each case runs in a savepoint that is rolled back, so cases cannot see each other's writes.
    with transaction.atomic():
        # CSRF enforced, as on a real site: a view the middleware refuses would answer with Django's HTML 403.
        status, content_type, headers, body = fuzzing.send_django(Client(enforce_csrf_checks=True), case, secret)
        transaction.set_rollback(True)
    problems = fuzzing.problems(case, status, content_type, headers, body)
    assert not problems, (problems, case.describe(), body[:500])


@pytest.fixture
def robust(demo_content, secret):
    """The demo site as `make demo` serves it (its URLs, templates and error pages), limits lifted."""
    with override_settings(AGENT_HANDSHAKE=ROBUST_SETTINGS, ROOT_URLCONF="demo_site.urls"):
        yield secret


#: Bounded for CI (a few seconds each, the same examples every run); bench/bench_fuzz.py explores further.
#: The function-scoped fixtures (the database transaction, the API key) are meant to be shared by every example:
#: each example runs in its own savepoint, rolled back (see check()).
BOUNDED = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@BOUNDED
@given(case=fuzzing.converse_cases())
@example(case=fuzzing.Case.converse({"capability": "content_search", "query": "sen\x00cha"}))
@example(case=fuzzing.Case.converse({"capability": "content_search", "query": "tea", "session_id": "\ud800"}))
@example(case=fuzzing.Case.converse({"capability": "content_search", "query": "tea", "clarification": "a\x00"}))
@example(case=fuzzing.Case.converse({"capability": "content_search", "query": "x", "auth": "Bearer ahp_\x00_x"}))
@example(case=fuzzing.Case.converse(place("context.requesting_agent", "bot\x00")))
@example(case=fuzzing.Case.converse(place("context.input.product", "Sen\ud800cha")))
@example(case=fuzzing.Case.converse(place("context.filters.published_after", "2025-02-30")))
@example(case=fuzzing.Case.converse(place("context.filters.published_before", "2025-13-01")))
@example(case=fuzzing.Case.converse(place("context.filters.published_after", "2025-01-01T25:00:00")))
@example(case=fuzzing.Case.converse(place("context.filters.published_after", "0000-01-01")))
@example(case=fuzzing.Case.converse(place("context.filters.published_after", "2025-01-01T00:00:00-23:59")))
@example(case=fuzzing.Case.converse(place("context.filters.published_after", "٢٠٢٥-٠١-٠١")))
@example(case=fuzzing.Case("POST", CONVERSE, {}, fuzzing.deep(1200)))
@example(case=fuzzing.Case.converse(place("query", "\u200b")))
@example(case=fuzzing.Case.converse(place("query", " ?! ")))
@example(case=fuzzing.Case.converse(place("query", " \t ")))
@example(case=fuzzing.Case.converse(place("query", "tea"), **{"X-AHP-Key-Id": "x", "X-AHP-Timestamp": "1" + "0" * 400}))
@example(case=fuzzing.Case.converse(place("query", "sencha"), **{"X-AHP-Key-Id": "x", "X-AHP-Signature": "v1=é"}))
@example(case=fuzzing.Case.converse(place("query", "sencha"), **{"Idempotency-Key": "a\x00"}))
@example(case=fuzzing.Case.converse(place("query", "sencha"), CONTENT_LENGTH="abc"))
def test_no_generated_converse_request_gets_a_5xx(robust, case):
    check(case, robust)


@BOUNDED
@given(case=fuzzing.other_cases())
@example(case=fuzzing.Case("GET", STATUS + "x", {"Accept": "application/agent+json"}, b""))
@example(case=fuzzing.Case("GET", STATUS + "x%00", {"Authorization": fuzzing.VALID_BEARER}, b""))
@example(case=fuzzing.Case("GET", "/blog/x%00.md", {}, b""))
@example(case=fuzzing.Case("GET", "/blog/x%00/", {"Accept": "text/markdown"}, b""))
@example(case=fuzzing.Case("GET", STATUS + "x", {"X-AHP-Key-Id": "x", "X-AHP-Timestamp": "1" + "0" * 400}, b""))
@example(case=fuzzing.Case("POST", "/.well-known/agent.json", {}, b"{}"))
@example(case=fuzzing.Case("PUT", "/llms.txt", {}, b"{}"))
@example(case=fuzzing.Case("DELETE", "/llms-full.txt", {}, b""))
@example(case=fuzzing.Case("POST", "/robots.txt", {}, b""))
@example(case=fuzzing.Case("DELETE", STATUS + "x", {}, b""))
def test_no_generated_request_to_another_url_gets_a_5xx(robust, case):
    check(case, robust)


@BOUNDED
@given(case=fuzzing.nlweb_cases())
@example(case=fuzzing.Case("POST", "/ask", {}, b'{"query": {"text": "tea\\u0000"}}'))
@example(case=fuzzing.Case("POST", "/ask", {}, b'{"query": {"text": "tea", "price": "cheap"}}'))
@example(case=fuzzing.Case("POST", "/ask", {"Accept": "text/event-stream"}, b'{"query": {"text": "sencha"}}'))
@example(case=fuzzing.Case("POST", "/ask", {}, b'{"query": {"text": "x", "capability": "escalate_to_human"}}'))
@example(case=fuzzing.Case("POST", "/ask", {}, fuzzing.deep(1200)))
@example(case=fuzzing.Case("POST", "/await", {"Authorization": fuzzing.VALID_BEARER}, b'{"promise_token": "x"}'))
def test_no_generated_nlweb_request_gets_a_5xx(robust, case):
    check(case, robust)


@BOUNDED
@given(case=fuzzing.mcp_cases())
@example(case=fuzzing.Case("POST", "/mcp", {}, b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, 7, null]'))
@example(case=fuzzing.Case("POST", "/mcp", {"Origin": "null"}, b"{}"))
@example(case=fuzzing.Case("POST", "/mcp", {}, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                           b'{"name": "check_inventory", "arguments": {"query": "tea\\u0000"}}}'))  # fmt: skip
@example(case=fuzzing.Case("POST", "/capabilities/check_inventory", {}, b'{"query": "x", "context": 5}'))
@example(case=fuzzing.Case("POST", "/capabilities/%00", {}, b'{"query": "x"}'))
@example(case=fuzzing.Case("POST", "/capabilities/check_inventory", {},
                           b'{"query": "x", "product": "LK", "context": {"input": "notdict"}}'))  # fmt: skip
@example(case=fuzzing.Case("POST", "/capabilities/check_inventory", {}, b'{"query": "x", "auth": 5}'))
@example(case=fuzzing.Case("POST", "/mcp", {"Mcp-Name": "=?base64?%%%?=", "MCP-Protocol-Version": "2026-07-28"},
                           b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'))  # fmt: skip
def test_no_generated_mcp_or_capability_request_gets_a_5xx(robust, case):
    check(case, robust)


@BOUNDED
@given(case=fuzzing.intent_cases())
@example(case=fuzzing.Case("POST", "/intent", {}, b'{"protocol_version": "1.0", "attribution": 5}'))
@example(case=fuzzing.Case("POST", "/intent", {}, b"[]"))
def test_no_generated_intent_request_gets_a_5xx(robust, case):
    check(case, robust)


@BOUNDED
@given(case=fuzzing.schema_template_cases())
@example(case=fuzzing.Case("POST", "/schema-templates", {}, b'{"schema_id": "book_appointment_v1", "payload": []}'))
@example(case=fuzzing.Case("POST", "/schema-templates", {}, b'{"schema_id": "check_inventory_v1\\n", "payload": {}}'))
@example(case=fuzzing.Case("GET", "/schema-templates/%00", {}, b""))
@example(case=fuzzing.Case("POST", "/agent/handshake", {}, b'{"did": 5, "public_key": [], "challenge": null}'))
@example(case=fuzzing.Case("POST", "/agent/handshake/verify", {}, b'{"handshake_id": "\\u0000", "did": "x"}'))
def test_no_generated_schema_template_or_handshake_request_gets_a_5xx(robust, case):
    check(case, robust)


def test_the_strategies_reach_the_code_behind_validation(robust):
    """Not every generated converse body is refused at parse time: some are answered (a guard against strategies
    that only ever exercise the JSON parser)."""
    statuses = []

    def send(case):
        with transaction.atomic():
            statuses.append(fuzzing.send_django(Client(), case, robust)[0])
            transaction.set_rollback(True)

    fuzzing.run(fuzzing.converse_cases(), 40, send, random_seed=9)
    assert len(statuses) == 40
    assert sum(status in (200, 202) for status in statuses) >= 3, statuses


@pytest.mark.parametrize("accept", ["application/agent+json", "text/markdown"])
def test_the_app_endpoints_answer_for_themselves_whatever_the_accept_header(client, secret, accept):
    """The middleware's manifest and markdown answers stop at /agent/converse and the status URL: an agent
    polling its job with Accept: application/agent+json gets the job, in AHP JSON with rate-limit headers."""
    response = client.get(STATUS + "no-such-job", headers={"Accept": accept, "Authorization": f"Bearer {secret}"})
    assert_ahp_error(response, 404, "invalid_request")
    assert_rate_headers(response)
    response = client.get(CONVERSE, headers={"Accept": accept})
    assert_ahp_error(response, 405, "method_not_allowed")
    assert_rate_headers(response)
