"""GET /.well-known/agent.json: content, schema validity, HTTP caching and invalidation."""

from __future__ import annotations

import time

import jsonschema
import pytest
from django.contrib.contenttypes.models import ContentType
from django.test import override_settings
from django.utils.http import parse_http_date

from agent_handshake.ahp.request import REQUEST_SCHEMA
from agent_handshake.models import ContentSignalOverride, SiteProfile
from agent_handshake.registry import Capability
from tests.ahp_schema import assert_valid_manifest, assert_valid_request
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

MANIFEST = "/.well-known/agent.json"


def get_manifest(client, **headers):
    response = client.get(MANIFEST, headers=headers)
    assert response.status_code == 200, response.content
    return response, response.json()


def make_profile(**fields):
    defaults = {"name": "Lantern & Kettle", "description": "A tea shop.", "contact_email": "hi@example.com"}
    return SiteProfile.objects.create(**{**defaults, **fields})


def test_manifest_validates_against_the_published_schema(client, ahp_schemas):
    make_profile()
    response, manifest = get_manifest(client)
    assert response["Content-Type"] == "application/json"
    assert_valid_manifest(manifest, ahp_schemas)
    assert manifest["ahp"] == "0.1"
    # Registered content makes the site MODE2: site_info, content_search and one get_<model> per rich type;
    # the demo shop's declared capabilities make it MODE3.
    assert manifest["modes"] == ["MODE1", "MODE2", "MODE3"]
    assert manifest["endpoints"] == {"content": "/llms.txt", "converse": "/agent/converse"}
    names = [capability["name"] for capability in manifest["capabilities"]]
    assert names.index("site_info") < names.index("content_search")
    assert {"get_video", "get_product"} <= set(names)
    video = next(c for c in manifest["capabilities"] if c["name"] == "get_video")
    assert video["response_types"] == ["media/video", "text/answer"]
    assert video["accept_fallback"] is True


def test_manifest_is_built_from_profile_signals_and_settings(client):
    make_profile(name="Kettle Works", description="Teapots.", ai_train=True, search=False)
    _, manifest = get_manifest(client)
    assert manifest["name"] == "Kettle Works"
    assert manifest["description"] == "Teapots."
    assert manifest["content_signals"] == {
        "ai_train": True,
        "ai_input": True,
        "search": False,
        "attribution_required": True,
    }
    assert manifest["authentication"] == "bearer"  # unset: capabilities here need credentials
    # Both forms of the rate limits, as NOTES.md decides: §4.3's string and §11.5's object.
    assert manifest["rate_limit"] == "30/minute"
    assert manifest["rate_limits"]["authenticated"]["requests"] == "120/minute"
    assert manifest["links"]["llms_full_txt"] == "http://testserver/llms-full.txt"


def test_without_a_profile_the_settings_defaults_are_used(client):
    _, manifest = get_manifest(client)
    assert manifest["name"] == "Test Site"
    assert manifest["content_signals"]["ai_train"] is False


def test_rate_limits_and_authentication_come_from_settings(client, settings):
    settings.AGENT_HANDSHAKE = {
        **settings.AGENT_HANDSHAKE,
        "AUTHENTICATION": "api_key",
        "RATE_LIMITS": {"unauthenticated": {"requests": "10/minute", "token_budget": "900/session"}},
    }
    _, manifest = get_manifest(client)
    assert manifest["authentication"] == "api_key"
    assert manifest["rate_limit"] == "10/minute"
    tiers = manifest["rate_limits"].pop("verified_agents")  # verified agents' trust tiers (test_verified_agents.py)
    assert [tier["name"] for tier in tiers["tiers"]] == ["trusted", "verified", "probation"]
    assert manifest["rate_limits"] == {
        "unauthenticated": {"requests": "10/minute", "token_budget": "900/session"},
        "authenticated": {"requests": "120/minute"},  # not set: its default, enforced (test_manifest_rate_limits.py)
    }


def test_contact_capability_is_offered_once_the_profile_has_contact_details(
    client, ahp_schemas, django_capture_on_commit_callbacks
):
    _, manifest = get_manifest(client)
    assert "contact" not in [c["name"] for c in manifest["capabilities"]]
    with django_capture_on_commit_callbacks(execute=True):
        make_profile(contact_email="desk@example.com")
    _, manifest = get_manifest(client)
    contact = next(c for c in manifest["capabilities"] if c["name"] == "contact")
    assert contact == {
        "name": "contact",
        "description": contact["description"],
        "mode": "MODE1",
        "response_types": ["application/data", "text/answer"],
    }
    assert_valid_manifest(manifest, ahp_schemas)


def test_registered_capabilities_drive_modes_and_entries(client, registries, ahp_schemas):
    _, capabilities = registries
    capabilities.register(
        Capability(
            name="get_video",
            description="Retrieve a video by title or topic",
            mode="MODE2",
            response_types=["media/video", "text/answer"],
            accept_fallback=True,
        )
    )
    for capability in list(capabilities):  # only this test's MODE2 capability and the built-in ones
        if capability.mode == "MODE3":
            capabilities.unregister(capability.name)
    _, manifest = get_manifest(client)
    assert manifest["modes"] == ["MODE1", "MODE2"]
    assert manifest["authentication"] == "none"
    assert manifest["async"] == {"supported": False}
    entry = next(c for c in manifest["capabilities"] if c["name"] == "get_video")
    assert entry["accept_fallback"] is True
    assert entry["response_types"] == ["media/video", "text/answer"]
    assert_valid_manifest(manifest, ahp_schemas)


def test_known_schema_deviation_unknown_keys_are_rejected_by_the_schema(ahp_schemas):
    """NOTES.md: the published schema forbids keys the spec's newer text adds (``integrations``, a
    capability's ``auth_required``). We emit ``integrations`` only once those integrations exist, and
    ``auth_required`` on capabilities that need credentials (tests/ahp_schema.py sets exactly that key aside when
    validating); this test keeps the deviation visible so it is not mistaken for a bug in our manifest."""
    validator = jsonschema.Draft7Validator(ahp_schemas["manifest"])
    base = {"ahp": "0.1", "modes": ["MODE1"], "content_signals": {"ai_input": True}}
    assert validator.is_valid(base)
    assert not validator.is_valid({**base, "integrations": {"mcp": {"url": "/mcp"}}})
    capability = {"name": "x", "description": "d", "mode": "MODE3", "auth_required": True}
    assert not validator.is_valid({**base, "capabilities": [capability]})
    assert not validator.is_valid({**base, "rate_limits": {"verified_agents": {"tiers": []}}})


def test_known_schema_deviation_a_request_may_leave_the_capability_out(ahp_schemas):
    """NOTES.md: the published request schema requires ``capability``; we accept a request without it and route the
    query (tests/concierge/test_routing.py), optionally by the agent's ``context.intent_vector``, a key the schema's
    closed ``context`` forbids. Our own request schema (published in /openapi.json) says so; tests/ahp_schema.py sets
    exactly these keys aside when validating a request against the published one."""
    published = jsonschema.Draft7Validator(ahp_schemas["request"])
    ours = jsonschema.Draft7Validator(REQUEST_SCHEMA)
    routed = {"ahp": "0.1", "query": "Is LK-TEA-0001 in stock?"}
    with_vector = {**routed, "context": {"intent_vector": [0.1, 0.2]}}
    assert published.is_valid({**routed, "capability": "check_inventory"})
    assert not published.is_valid(routed)
    assert not published.is_valid({**with_vector, "capability": "check_inventory"})
    assert ours.is_valid(routed)
    assert ours.is_valid(with_vector)
    assert "capability" not in REQUEST_SCHEMA["required"]
    assert_valid_request(with_vector, ahp_schemas)


def test_cache_headers_and_conditional_get(client):
    make_profile()
    response, _ = get_manifest(client)
    etag, last_modified = response["ETag"], response["Last-Modified"]
    assert etag.startswith('"manifest-')
    assert "max-age=300" in response["Cache-Control"]
    assert "public" in response["Cache-Control"]

    not_modified = client.get(MANIFEST, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    assert not_modified["ETag"] == etag

    since = client.get(MANIFEST, headers={"If-Modified-Since": last_modified})
    assert since.status_code == 304
    stale = client.get(MANIFEST, headers={"If-None-Match": '"something-else"'})
    assert stale.status_code == 200


def test_last_modified_follows_the_latest_change(client):
    """Last-Modified is when the state was first served, so not before the latest change (tests/
    test_documents_caching.py: it moves forward on every change, including those that leave no date behind)."""
    profile = make_profile()
    response, _ = get_manifest(client)
    assert int(profile.updated_at.timestamp()) <= parse_http_date(response["Last-Modified"]) <= time.time()


def test_head_is_answered_like_get(client):
    make_profile()
    response = client.head(MANIFEST)
    assert response.status_code == 200
    assert response["ETag"] == client.get(MANIFEST)["ETag"]


def test_profile_change_invalidates_manifest_and_etag(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        profile = make_profile(ai_train=False)
    first, manifest = get_manifest(client)
    assert manifest["content_signals"]["ai_train"] is False

    with django_capture_on_commit_callbacks(execute=True):
        profile.ai_train = True
        profile.save()
    second, manifest = get_manifest(client)
    assert manifest["content_signals"]["ai_train"] is True
    assert second["ETag"] != first["ETag"]
    assert client.get(MANIFEST, headers={"If-None-Match": first["ETag"]}).status_code == 200


def test_signal_override_and_content_changes_change_the_etag(client, publish, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        profile = make_profile()
    etags = [get_manifest(client)[0]["ETag"]]

    publish(Article, title="Oolong basics", slug="oolong-basics", body="Roll, bruise, oxidise.")
    etags.append(get_manifest(client)[0]["ETag"])

    with django_capture_on_commit_callbacks(execute=True):
        ContentSignalOverride.objects.create(
            profile=profile, content_type=ContentType.objects.get_for_model(Article), ai_input=False
        )
    etags.append(get_manifest(client)[0]["ETag"])

    with django_capture_on_commit_callbacks(execute=True):
        Article.objects.get(slug="oolong-basics").delete()
    etags.append(get_manifest(client)[0]["ETag"])
    assert len(set(etags)) == 4, etags


def test_settings_change_rebuilds_the_manifest(client):
    _, before = get_manifest(client)
    with override_settings(AGENT_HANDSHAKE={"SITE_NAME": "Renamed by settings"}):
        _, after = get_manifest(client)
    assert before["name"] == "Test Site"
    assert after["name"] == "Renamed by settings"


def test_wrong_method_gets_ahp_json_405(client):
    response = client.post(MANIFEST, data="{}", content_type="application/json")
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "error"
    assert body["code"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD, OPTIONS"


def test_long_profile_text_is_cut_to_the_schema_limits(client, ahp_schemas):
    make_profile(name="N" * 128, description="D" * 600)
    _, manifest = get_manifest(client)
    assert len(manifest["name"]) <= 128
    assert len(manifest["description"]) <= 512
    assert_valid_manifest(manifest, ahp_schemas)


def test_profile_text_with_combining_marks_is_cut_to_the_schema_limits(client, ahp_schemas):
    """The schema's maxLength counts code points; Django's Truncator does not count combining marks (Arabic
    harakat, Thai tone marks, Hebrew points), so a vocalised Arabic description of 780 code points was not cut."""
    arabic = "مَرْحَبًا بِكُمْ فِي مَتْجَرِ الشَّايِ " * 20
    make_profile(name="مَتْجَرُ الشَّايِ", description=arabic)
    _, manifest = get_manifest(client)
    assert len(manifest["description"]) <= 512
    assert manifest["description"].startswith(arabic[:500])
    assert_valid_manifest(manifest, ahp_schemas)
    with override_settings(AGENT_HANDSHAKE={"SITE_NAME": "ก่" * 100}):  # 200 code points, no profile name
        SiteProfile.objects.update(name="")
        _, manifest = get_manifest(client)
    assert len(manifest["name"]) <= 128
    assert_valid_manifest(manifest, ahp_schemas)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/agent/converse"),
        ("get", "/capabilities/content_search"),
        ("post", "/agent/converse/status/some-job"),
        ("get", "/agent/handshake"),
        ("post", MANIFEST),
        ("delete", "/llms.txt"),
    ],
)
def test_known_schema_deviation_a_wrong_method_is_method_not_allowed(client, ahp_schemas, method, path):
    """NOTES.md: every error of an AHP endpoint, a wrong method included, is the §10 JSON body. §10's table and the
    published response schema's closed ``code`` enum have no wrong-method row, so our 405 says
    ``method_not_allowed`` (the name every front door uses: NLWeb's ``METHOD_NOT_ALLOWED``, MCP's, ASP's), with
    ``allowed_methods`` and ``Allow``. That code is the one thing the schema refuses in the body: this test keeps
    the deviation visible."""
    from tests.ahp.test_converse import response_validator

    response = getattr(client, method)(path)
    assert response.status_code == 405
    body = response.json()
    assert body["code"] == "method_not_allowed"
    assert response["Allow"] == ", ".join(body["allowed_methods"])
    validator = response_validator(ahp_schemas)
    assert not validator.is_valid(body)
    assert validator.is_valid({**body, "code": "invalid_request"})  # with a code of the enum it would be valid
