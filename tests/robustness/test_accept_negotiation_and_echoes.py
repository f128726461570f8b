"""What the client said it accepts, and what an error says back: an event stream gzipped only for a client that accepts
gzip, JSON or an event stream as Accept asks (an Accept the parser cannot read included), Retry-After on a 429 only, and
the names and keys a client chose named one by one and cut to their bound (Django's test client through the whole
middleware stack, the demo content in PostgreSQL)."""

from __future__ import annotations

import gzip
import json

import pytest

from agent_handshake.models import AgentClient, ApiKey

pytestmark = pytest.mark.django_db

OOLONG = {"query": {"text": "oolong"}}


@pytest.fixture
def secret():
    agent = AgentClient.objects.create(name="Negotiation agent")
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def ask(client, **headers):
    return client.post("/ask", json.dumps(OOLONG), content_type="application/json", headers=headers)


# --- Accept-Encoding: gzip only where the client accepts it ---------------------------------------------------------


@pytest.mark.parametrize(
    "accept_encoding",
    [
        "gzip;q=0, identity",  # RFC 9110 §12.5.3: q=0 is "not acceptable"
        "gzip; Q=0.000",
        "x-gzip-not",  # another coding, though "-" is a word boundary
        "gzip-like",
        "*, gzip;q=0",  # named with q=0: "*" does not bring it back
        "*;q=0",
        "gzip;q=nonsense",  # a q-value that is not one: send what every client reads
        "identity",
        "",
    ],
)
def test_an_event_stream_is_not_gzipped_for_a_client_that_refuses_gzip(client, settings, demo_content, accept_encoding):
    """The stream was gzipped whenever the word "gzip" appeared in Accept-Encoding, q=0 or part of another
    coding's name; the client got bytes it had said it cannot read. Without ``GZipMiddleware``, which makes the
    same mistake with its own test of the header (Django's, for every response it compresses)."""
    settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != "django.middleware.gzip.GZipMiddleware"]
    response = ask(client, Accept="text/event-stream", **{"Accept-Encoding": accept_encoding})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert "Content-Encoding" not in response
    assert b"".join(response.streaming_content).startswith(b"event: start\n")


@pytest.mark.parametrize("accept_encoding", ["gzip", "GZIP", "br;q=1, gzip;q=0.5", "x-gzip", "*", "identity, *;q=0.1"])
def test_an_event_stream_is_gzipped_for_a_client_that_accepts_gzip(client, demo_content, accept_encoding):
    """Codings are case-insensitive, ``x-gzip`` is gzip (RFC 9110 §8.4.1.3) and ``*`` is any coding not named."""
    response = ask(client, Accept="text/event-stream", **{"Accept-Encoding": accept_encoding})
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    assert gzip.decompress(b"".join(response.streaming_content)).startswith(b"event: start\n")


# --- Accept: an event stream only when the client asks for one ------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/json, text/event-stream;q=0",  # q=0: not acceptable
        "text/event-stream;q=0",
        "text/event-stream;q=0, */*",
        "*/*",  # any type: the JSON answer is one
        "text/*",
        "application/json, text/event-stream;q=0.5",  # JSON preferred
        "text/event-stream;q=0.2, */*;q=0.8",
    ],
)
def test_a_client_that_does_not_ask_for_an_event_stream_gets_json(client, demo_content, accept):
    response = ask(client, Accept=accept)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["_meta"]["response_type"]


@pytest.mark.parametrize(
    "accept",
    [
        "text/event-stream",
        "application/json, text/event-stream",  # both as welcome: a stream, as before
        "application/json;q=0.5, text/event-stream",
        "TEXT/Event-Stream; charset=utf-8",
        "*/*;q=0.1, text/event-stream;q=0.3",
    ],
)
def test_a_client_that_asks_for_an_event_stream_gets_one(client, demo_content, accept):
    response = ask(client, Accept=accept)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"


# --- what an AHP error says back of what the client chose ----------------------------------------------------------


def test_an_unknown_capability_name_is_echoed_cut(client, demo_content):
    """The 404 repeated the whole name from the path (6,000 characters made a 6 KB answer); it is cut to the
    64 characters a capability name may have, the last an ellipsis."""
    response = client.post("/capabilities/" + "a" * 6000, json.dumps({"query": "x"}), content_type="application/json")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "unknown_capability"
    assert "a" * 63 + "…" in body["message"]
    assert "a" * 64 not in body["message"]
    assert "content_search" in body["available_capabilities"]
    assert len(response.content) < 2000
    named = client.post("/capabilities/teleport", json.dumps({"query": "x"}), content_type="application/json")
    assert "'teleport'" in named.json()["message"]  # a name within the limit is quoted whole


def test_an_unknown_body_key_is_named_cut(client, demo_content):
    key = "k" * 6000
    response = client.post(
        "/capabilities/content_search", json.dumps({"query": "tea", key: 1}), content_type="application/json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["fields"] == ["k" * 63 + "…"]
    assert "k" * 64 not in body["message"]
    assert len(response.content) < 2000


def test_a_made_up_method_is_echoed_cut(client):
    response = client.generic("M" * 6000, "/agent/converse")
    assert response.status_code == 405
    body = response.json()
    assert "M" * 63 + "…" in body["message"]
    assert "M" * 64 not in body["message"]
    assert response["Allow"] == "POST, OPTIONS"
    assert len(response.content) < 2000


# --- Retry-After: only where the answer is "wait" ----------------------------------------------------------------


def test_retry_after_is_sent_with_a_429_only(client, settings):
    """A request refused for something else (here a body over the cap, 413) while its network's count was used
    up carried ``Retry-After``, as if waiting would make it succeed. The ``X-RateLimit-*`` headers still say the
    count is used up (§11.1: on every response)."""
    settings.AGENT_HANDSHAKE = {
        **settings.AGENT_HANDSHAKE,
        "RATE_LIMITS": {"unauthenticated": {"requests": "2/minute"}},
    }
    unknown = json.dumps({"ahp": "0.1", "capability": "no_such_capability", "query": "hello"})
    statuses = [client.post("/agent/converse", unknown, content_type="application/json").status_code for _ in range(3)]
    assert statuses == [400, 400, 429]
    limited = client.post("/agent/converse", unknown, content_type="application/json")
    assert limited.status_code == 429
    assert int(limited["Retry-After"]) >= 1

    too_large = json.dumps({"capability": "content_search", "query": "x" * 9000})
    response = client.post("/agent/converse", too_large, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert response["X-RateLimit-Remaining"] == "0"
    assert "Retry-After" not in response
    wrong_method = client.get("/agent/converse")
    assert wrong_method.status_code == 405
    assert "Retry-After" not in wrong_method


# --- the field an error names ---------------------------------------------------------------------------------------


def converse_inventory(client, secret, product_input):
    body = {"ahp": "0.1", "capability": "check_inventory", "query": "x", "context": {"input": product_input}}
    response = client.post(
        "/agent/converse", json.dumps(body), content_type="application/json", headers={"X-AHP-Key": secret}
    )
    assert response.status_code == 400, response.content[:500]
    return response


def test_each_unexpected_input_key_is_named(client, demo_content, secret):
    """An input key the capability's schema does not allow (``additionalProperties: false``) was named
    ``context.input.(input)``, the input as a whole; each such key is now named, the one to remove."""
    body = converse_inventory(client, secret, {"product": "Sencha", "zzz": 1, "aaa": 2}).json()
    assert body["code"] == "invalid_request"
    assert body["fields"] == ["context.input.aaa", "context.input.zzz"]


def test_an_unexpected_input_key_is_named_cut(client, demo_content, secret):
    key = "z" * 6000
    response = converse_inventory(client, secret, {"product": "Sencha", key: 1})
    assert response.json()["fields"] == ["context.input." + "z" * 63 + "…"]
    assert "z" * 64 not in response.json()["message"]
    assert len(response.content) < 2000


def test_an_unexpected_filter_key_is_named(client, demo_content):
    """The same for the request's own closed object, ``context.filters``: the key is named, not the filters."""
    body = {"ahp": "0.1", "capability": "content_search", "query": "tea", "context": {"filters": {"sectoins": []}}}
    response = client.post("/agent/converse", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["fields"] == ["context.filters.sectoins"]


#: A header parameter in RFC 2231's extended form with a charset Python does not know: Django's header parser
#: (behind request.accepted_type and get_preferred_type) raises ValueError on it.
HOSTILE = "; x*=xx''1"


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_ACCEPT": "text/event-stream" + HOSTILE},
        {"HTTP_ACCEPT": "application/json" + HOSTILE},
        {"HTTP_ACCEPT": "text/event-stream", "HTTP_ACCEPT_ENCODING": "gzip" + HOSTILE},
    ],
)
def test_a_header_the_parser_cannot_read_is_no_stream_not_a_500(client, demo_content, headers):
    response = client.post(
        "/ask", data=json.dumps({"query": {"text": "oolong"}}), content_type="application/json", **headers
    )
    assert response.status_code == 200  # was a 500: the parser's ValueError
    # What cannot be read asks for nothing: JSON, except where the Accept that names the stream is readable.
    streamed = response.headers["Content-Type"].startswith("text/event-stream")
    assert streamed == (headers["HTTP_ACCEPT"] == "text/event-stream")


@pytest.mark.parametrize("accept", ["application/agent+json" + HOSTILE, "text/markdown" + HOSTILE])
def test_a_page_asked_for_with_an_accept_the_parser_cannot_read_is_the_page(client, demo_content, accept):
    response = client.get("/page/", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/html")
