"""HTTP caching of the generated documents (/llms.txt, /llms-full.txt, /.well-known/agent.json, /openapi.json):
a client that revalidates by date only (If-Modified-Since) never keeps a changed document, the validators change
when a release changes a capability's published definition, and HEAD does not generate a streamed body."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
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
    assert parse_http_date(again["Last-Modified"]) > parse_http_date(both["Last-Modified"])
    assert by_date(client, "/llms.txt", again).status_code == 304  # and the date is stable while nothing changes


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
    assert by_date(client, MANIFEST, second).status_code == 304


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
