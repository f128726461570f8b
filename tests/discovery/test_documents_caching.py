"""HTTP caching of the generated documents (/llms.txt, /llms-full.txt, /.well-known/agent.json, /openapi.json):
a client that revalidates by date only (If-Modified-Since) never keeps a changed document, the validators change
when a release changes a capability's published definition, and HEAD does not generate a streamed body."""

from __future__ import annotations

import io
import time
import wsgiref.util

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext
from django.utils.http import parse_http_date

from agent_handshake import state
from agent_handshake.models import ContentSignalOverride, SiteProfile
from agent_handshake.registry import Capability
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

MANIFEST = "/.well-known/agent.json"


def by_date(client, path, earlier):
    """GET ``path`` as a client that kept ``earlier`` and revalidates with its Last-Modified only."""
    return client.get(path, headers={"If-Modified-Since": earlier["Last-Modified"]})


def settles(client, path):
    """Once nothing changes, a client revalidating by date gets 304. Right after several changes in one second the
    state's time is ahead of the clock and the date sent is the clock's (RFC 9110 §8.8.2.1: never later than
    Date), so a client holding it is answered in full until the clock has passed the state's time."""
    deadline = time.monotonic() + 5
    while True:
        fresh = client.get(path)
        assert parse_http_date(fresh["Last-Modified"]) <= time.time()  # never ahead of the server's clock
        if by_date(client, path, fresh).status_code == 304:
            return fresh
        assert time.monotonic() < deadline, "the date never settled"
        time.sleep(0.25)


def test_deleting_the_newest_article_is_not_answered_304_by_date(client, publish, django_capture_on_commit_callbacks):
    publish(Article, title="First steeping", slug="first", body="One.")
    one = client.get("/llms.txt")
    publish(Article, title="Second steeping", slug="second", body="Two.")
    both = client.get("/llms.txt")
    assert "Second steeping" in both.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        Article.objects.get(slug="second").delete()
    # The list is the one before the second article again: a client that kept either list gets the current one.
    for earlier in (one, both):
        again = by_date(client, "/llms.txt", earlier)
        assert again.status_code == 200, earlier["Last-Modified"]
        assert "Second steeping" not in again.content.decode()
    assert parse_http_date(settles(client, "/llms.txt")["Last-Modified"]) > parse_http_date(both["Last-Modified"])


def test_removing_a_signal_override_is_not_answered_304_by_date(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        profile = SiteProfile.objects.create(name="Lantern & Kettle")
        override = ContentSignalOverride.objects.create(
            profile=profile, content_type=ContentType.objects.get_for_model(Article), ai_input=False
        )
    before = client.get("/llms.txt")
    with django_capture_on_commit_callbacks(execute=True):
        override.delete()
    after = by_date(client, "/llms.txt", before)
    assert after.status_code == 200
    assert after["ETag"] != before["ETag"]


def test_two_edits_within_one_second_are_two_dates(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        profile = SiteProfile.objects.create(name="Lantern & Kettle")
    first = client.get(MANIFEST)
    with django_capture_on_commit_callbacks(execute=True):
        profile.name = "Kettle & Lantern"
        profile.save()
    second = by_date(client, MANIFEST, first)
    assert second.status_code == 200
    assert second.json()["name"] == "Kettle & Lantern"
    settles(client, MANIFEST)


def test_a_release_with_a_new_capability_is_not_answered_304_by_date(client, registries):
    """No profile and no content: the database's date was 2000-01-01 for ever, whatever the code published."""
    _, capabilities = registries
    before = client.get(MANIFEST)
    capabilities.register(
        Capability(name="tide_tables", description="Today's tide tables", mode="MODE2", handler=lambda context: None)
    )
    state.invalidate()  # the new release's process: its own snapshot, the same shared cache
    after = by_date(client, MANIFEST, before)
    assert after.status_code == 200
    assert "tide_tables" in [c["name"] for c in after.json()["capabilities"]]


def test_if_none_match_comes_before_if_modified_since(client, publish, django_capture_on_commit_callbacks):
    """RFC 9110 §13.2.2: with both, the entity tag decides."""
    publish(Article, title="First steeping", slug="first", body="One.")
    old = client.get("/llms.txt")
    publish(Article, title="Second steeping", slug="second", body="Two.")
    current = client.get("/llms.txt")
    stale_tag = {"If-None-Match": old["ETag"], "If-Modified-Since": current["Last-Modified"]}
    assert client.get("/llms.txt", headers=stale_tag).status_code == 200
    old_date = {"If-None-Match": current["ETag"], "If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}
    assert client.get("/llms.txt", headers=old_date).status_code == 304


QUOTE_V1 = {"type": "object", "properties": {"sku": {"type": "string"}}}
QUOTE_V2 = {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string", "pattern": "^LK-"}}}


def quote(description, input_schema):
    return Capability(
        name="quote",
        description=description,
        mode="MODE3",
        action_type="query",
        input_schema=input_schema,
        output_schema={"type": "object", "properties": {"price": {"type": "number"}}},
        handler=lambda invocation: {"price": 1.0},
    )


def test_a_release_that_changes_a_capabilitys_schema_serves_the_new_documents(client, registries):
    """Same names, new description and input schema: the old manifest and /openapi.json stayed in the shared
    cache under the same token, and were served with the same ETag."""
    _, capabilities = registries
    capabilities.register(quote("A price quote", QUOTE_V1))
    before = {path: client.get(path) for path in (MANIFEST, "/openapi.json")}
    capabilities.unregister("quote")
    capabilities.register(quote("A price quote for one product", QUOTE_V2))
    state.invalidate()  # the new release's process: its own snapshot, the same shared cache
    manifest = client.get(MANIFEST, headers={"If-None-Match": before[MANIFEST]["ETag"]})
    assert manifest.status_code == 200
    entry = next(c for c in manifest.json()["capabilities"] if c["name"] == "quote")
    assert (entry["description"], entry["input_schema"]) == ("A price quote for one product", QUOTE_V2)
    document = client.get("/openapi.json", headers={"If-None-Match": before["/openapi.json"]["ETag"]})
    assert document.status_code == 200
    operation = document.json()["paths"]["/capabilities/quote"]["post"]
    assert operation["summary"] == "A price quote for one product"
    assert operation["requestBody"]["content"]["application/json"]["schema"]["properties"]["sku"]["pattern"] == "^LK-"


def wsgi(method, path):
    """``path`` requested through Django's WSGI handler, its body read as a WSGI server (gunicorn) reads it: every
    chunk of the iterable, HEAD or not. Returns the status line, the headers, the body and the queries run."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(b"")}
    wsgiref.util.setup_testing_defaults(environ)
    started = {}

    def start_response(status, headers, exc_info=None):
        started.update(status=status, headers=dict(headers))

    # A real request's signals would close the test's database connection (inside its transaction): not here.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        with CaptureQueriesContext(connection) as queries:
            result = WSGIHandler()(environ, start_response)
            body = b"".join(result)
            result.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return started["status"], started["headers"], body, queries.captured_queries


def test_head_on_llms_full_txt_does_not_generate_the_body(client, publish):
    for n in range(3):
        publish(Article, title=f"Steeping {n}", slug=f"steeping-{n}", body=f"Note {n}.")
    status, get_headers, body, _ = wsgi("GET", "/llms-full.txt")
    assert status.startswith("200")
    assert b"Note 2." in body
    status, head_headers, body, queries = wsgi("HEAD", "/llms-full.txt")
    assert status.startswith("200")
    assert body == b""
    assert queries == []  # the snapshot is known; the documents are not read
    for name in ("Content-Type", "ETag", "Last-Modified", "Cache-Control", "Vary"):
        assert head_headers[name] == get_headers[name], name
    assert "Content-Length" not in head_headers  # GET's body is streamed: its length is not known either
