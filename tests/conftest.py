from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import celery._state
import pytest
from celery import Celery
from django.core.cache import caches

from agent_handshake import state
from agent_handshake.registry import capability_registry, content_registry

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts with no remembered content state and empty caches (the database is rolled back)."""
    from agent_handshake.concierge.routing import forget_site_examples

    state.invalidate()
    forget_site_examples()
    for cache in caches.all():
        cache.clear()
    yield
    state.invalidate()
    forget_site_examples()  # examples a test read may be rolled back with it


@pytest.fixture
def registries():
    """The content and capability registries, restored after the test changes them."""
    saved_content = (dict(content_registry._configs), list(content_registry.duplicates))
    saved_capabilities = (dict(capability_registry._capabilities), list(capability_registry.duplicates))
    saved_builtin = list(capability_registry.builtin)
    yield content_registry, capability_registry
    content_registry._configs, content_registry.duplicates = saved_content
    capability_registry._capabilities, capability_registry.duplicates = saved_capabilities
    capability_registry.builtin = saved_builtin
    state.invalidate()  # restored in place, without the registry's signal: a snapshot of the test's registry goes


@pytest.fixture(scope="session")
def ahp_schemas():
    """The JSON Schemas published with AHP Draft 0.1 (../shared/ahp-schema/0.1/)."""
    root = SHARED / "ahp-schema" / "0.1"
    if not root.is_dir():
        pytest.fail(f"The AHP schemas are missing: {root} (shared/ must sit beside the project)")
    return {name: json.loads((root / f"{name}.json").read_text()) for name in ("manifest", "request", "response")}


@pytest.fixture
def publish(django_capture_on_commit_callbacks):
    """Create registered objects through the ORM and run the on-commit indexing, as a real save would."""

    def create(model, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            return model.objects.create(**fields)

    return create


@pytest.fixture(scope="module")
def demo_content(django_db_setup, django_db_blocker):
    """The demo site's content, loaded and indexed (documents and passages) once for a test module.

    It is written outside the per-test transactions, so the module's tests share it, and deleted afterwards so
    other modules see the empty database they expect.
    """
    from django.core.management import call_command

    from agent_handshake.models import Document, LexemeStat
    from demo_site.blog.models import Author, Post, Tag
    from demo_site.pages.models import Page
    from demo_site.shop.models import Order, Product
    from demo_site.videos.models import Video

    with django_db_blocker.unblock():
        call_command("loaddata", "demo", verbosity=0)
        call_command("agent_reindex", verbosity=0)
    state.invalidate()
    yield
    with django_db_blocker.unblock():
        # Deleting the documents cascades to their passages; their words' passage counts go too.
        for model in (Document, LexemeStat, Order, Product, Video, Page, Post, Tag, Author):
            model.objects.all().delete()
    state.invalidate()


@pytest.fixture
def fake_openai():
    """An OpenAI-compatible server on 127.0.0.1 that records requests (see tests/fake_openai.py)."""
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def celery_app(monkeypatch):
    """Make a new Celery app the project's app (what `app = Celery("proj")` in proj/celery.py does)."""

    def make(**conf) -> Celery:
        app = Celery("site", set_as_current=False)
        app.conf.update(conf)
        monkeypatch.setattr(celery._state, "default_app", app)
        monkeypatch.setattr(celery._state._tls, "current_app", app)
        return app

    return make


SYSTEM_POSTGRES = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


@pytest.fixture
def database_without_pgvector():
    """The URL of a new database on the machine's own PostgreSQL (127.0.0.1:5432, no pgvector), dropped after."""
    import psycopg

    try:
        admin = psycopg.connect(**SYSTEM_POSTGRES, dbname="postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL accepts user postgres without a password on 127.0.0.1:5432 ({exc})")
    with admin:
        if admin.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            pytest.skip("the PostgreSQL on 127.0.0.1:5432 has pgvector; this test needs one without it")
        name = f"agent_handshake_no_pgvector_{os.getpid()}"
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield "postgres://{user}@{host}:{port}/".format(**SYSTEM_POSTGRES) + name
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def lookups(monkeypatch):
    """The host names resolved meanwhile (socket's own lookup, spied on)."""
    resolved = []
    resolve = socket.getaddrinfo

    def spied(host, *args, **kwargs):
        resolved.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spied)
    return resolved


#: The host the host tests serve the site on (tests/test_discovery_hosts.py, tests/test_hosts_front_doors.py).
SERVED_HOST = "agents.example"


@pytest.fixture
def host_site(settings):
    """The site served on :data:`SERVED_HOST` (and the test client's host), ``BASE_URL`` unset, and no forwarded
    host or port trusted: the base URL comes from the request alone."""
    settings.ALLOWED_HOSTS = ["testserver", SERVED_HOST]
    settings.USE_X_FORWARDED_PORT = False
    settings.USE_X_FORWARDED_HOST = False
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "BASE_URL": ""}
    return settings
