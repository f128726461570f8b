from __future__ import annotations

import json
import os
import pickle
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import celery._state
import pytest
from celery import Celery
from django.core.cache import caches
from django.db import connection, transaction
from filelock import FileLock

from agent_handshake import state
from agent_handshake.registry import capability_registry, content_registry

#: Data files the tests read, the published ones vendored with their source and licence (tests/data/*/SOURCE.md).
DATA = Path(__file__).resolve().parent / "data"


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
    """The JSON Schemas published with AHP Draft 0.1 (tests/data/ahp-schema/)."""
    root = DATA / "ahp-schema" / "0.1"
    return {name: json.loads((root / f"{name}.json").read_text()) for name in ("manifest", "request", "response")}


@pytest.fixture
def publish(django_capture_on_commit_callbacks):
    """Create registered objects through the ORM and run the on-commit indexing, as a real save would."""

    def create(model, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            return model.objects.create(**fields)

    return create


@pytest.fixture
def commit(django_capture_on_commit_callbacks):
    """Run a change as a committing transaction would: its on-commit callbacks (the indexing) run too."""

    def run(change, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return change(*args, **kwargs)

    return run


@pytest.fixture
def callback_host_lookups(monkeypatch):
    """Watch the lookups of the callback URL's host, ``localhost`` (nothing else in these tests resolves a name):
    ``watch(locked)`` returns the list it fills, for each lookup, with whether the request's connection was in a
    transaction then, and whether ``locked()`` (run in a thread of its own, so on a connection of its own) found the
    row the request works on locked."""

    def watch(locked: Callable[[], bool]) -> list[dict[str, bool]]:
        during_lookup: list[dict[str, bool]] = []
        resolve = socket.getaddrinfo
        # The request's connection, seen from the lookup, which runs in a thread of its own (for its timeout).
        caller = transaction.get_connection()

        def spied(host, *args, **kwargs):
            if host == "localhost":
                found: list[bool] = []
                checker = threading.Thread(target=lambda: found.append(locked()))
                checker.start()
                checker.join()
                during_lookup.append({"in_transaction": caller.in_atomic_block, "locked": found[0]})
            return resolve(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", spied)
        return during_lookup

    return watch


@pytest.fixture
def create_tables(db):
    """Create the tables of models kept out of the project's migrations (``tests/isolated_apps.py``) for one test:
    they go with its transaction, and so do their content types' rows, which the cache forgets after it."""
    from django.contrib.contenttypes.models import ContentType

    def create(*models) -> None:
        with connection.schema_editor() as editor:
            for model in models:
                editor.create_model(model)

    yield create
    ContentType.objects.clear_cache()


def _tables(cursor) -> list[str]:
    cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace")
    return [name for (name,) in cursor.fetchall()]


def _table_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in _tables(cursor):
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
    return counts


def _tables_with_rows() -> set[str]:
    with connection.cursor() as cursor:
        tables = _tables(cursor)
        cursor.execute(" UNION ALL ".join(f"(SELECT '{table}' FROM \"{table}\" LIMIT 1)" for table in tables))
        return {name for (name,) in cursor.fetchall()}


def _content_types() -> dict[tuple[str, str], int]:
    from django.contrib.contenttypes.models import ContentType

    return {(kind.app_label, kind.model): kind.pk for kind in ContentType.objects.all()}


class DemoSnapshot:
    """The demo site's content as the ``demo`` fixture and ``agent_reindex`` leave it, table by table.

    Loading and indexing the demo costs seconds (the saves, the full-text statistics, the embeddings). The first
    test process of a run to need it does that once, and keeps the rows it wrote (PostgreSQL ``COPY``, binary) in
    a file that every process of the run then copies back into its own database, for every module that asks. In
    another database the content types may have other ids (a transactional test's flush makes them again under new
    ones): the copied rows' references to them are moved to the ids of the same types before the restore commits.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tables: dict[str, bytes] = {}
        self.content_types: dict[tuple[str, str], int] = {}

    def load(self) -> None:
        if not self.tables:
            with FileLock(f"{self.path}.lock"):
                if not self.path.exists():
                    self.build()
                    self.path.write_bytes(pickle.dumps((self.tables, self.content_types)))
                    return
                self.tables, self.content_types = pickle.loads(self.path.read_bytes())
        self.restore()

    def build(self) -> None:
        from django.core.management import call_command

        before = _table_counts()
        call_command("loaddata", "demo", verbosity=0)
        call_command("agent_reindex", verbosity=0)
        written = {table for table, count in _table_counts().items() if count != before.get(table)}
        kept = sorted(table for table in written if before.get(table))
        if kept:
            pytest.fail(f"loading the demo changed tables that had rows before: {kept}")
        self.content_types = _content_types()
        with connection.cursor() as cursor:
            for table in sorted(written):
                with cursor.cursor.copy(f'COPY "{table}" TO STDOUT (FORMAT BINARY)') as copy:
                    self.tables[table] = b"".join(bytes(block) for block in copy)

    def restore(self) -> None:
        now = _content_types()
        moved = {old: now[key] for key, old in self.content_types.items() if now.get(key, old) != old}
        # Foreign keys are checked when the transaction commits: the tables may come back in any order, and
        # the references to content types be mended before then.
        with transaction.atomic(), connection.cursor() as cursor:
            for table, rows in self.tables.items():
                with cursor.cursor.copy(f'COPY "{table}" FROM STDIN (FORMAT BINARY)') as copy:
                    copy.write(rows)
            if moved:
                cursor.execute(
                    "SELECT conrelid::regclass::text, attname FROM pg_constraint JOIN pg_attribute"
                    " ON attrelid = conrelid AND attnum = ANY(conkey)"
                    " WHERE contype = 'f' AND confrelid = 'django_content_type'::regclass"
                )
                for table, column in cursor.fetchall():
                    if table.strip('"') in self.tables:
                        cases = " ".join(f"WHEN {old} THEN {new}" for old, new in moved.items())
                        cursor.execute(f'UPDATE {table} SET "{column}" = CASE "{column}" {cases} ELSE "{column}" END')
            # The rows keep their ids: the next row a test creates takes the id after the highest.
            cursor.execute(
                "SELECT table_name, pg_get_serial_sequence(quote_ident(table_name), 'id')"
                " FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name = 'id' AND table_name = ANY(%s)",
                [list(self.tables)],
            )
            for table, sequence in cursor.fetchall():
                if sequence:
                    cursor.execute(f'SELECT setval(%s, max(id)) FROM "{table}" HAVING max(id) IS NOT NULL', [sequence])


@pytest.fixture(scope="session")
def _migrated_tables_with_rows(django_db_setup, django_db_blocker) -> set[str]:
    """The tables the migrations fill (content types, permissions): what every module may expect to find."""
    with django_db_blocker.unblock():
        return _tables_with_rows()


def _uses_the_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or "django_db_setup" in item.fixturenames


@pytest.fixture(scope="module", autouse=True)
def _module_leaves_the_database_as_it_found_it(request, django_db_blocker):
    """Rows a module committed (through a live server, a worker, a module-scoped fixture) are removed after it,
    so that no module depends on the order the modules run in or on the worker that runs them."""
    if not any(_uses_the_database(item) for item in request.session.items if item.module is request.module):
        yield  # without a test that asks for it, the test database may not even be set up
        return
    migrated = request.getfixturevalue("_migrated_tables_with_rows")
    yield
    with django_db_blocker.unblock():
        left = _tables_with_rows() - migrated
        if left:
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE {} CASCADE".format(", ".join(f'"{table}"' for table in sorted(left))))
    state.invalidate()


@pytest.fixture(scope="session")
def _demo_snapshot(tmp_path_factory, worker_id) -> DemoSnapshot:
    # The base temporary folder is the worker's own under pytest-xdist; its parent is the whole run's.
    run_folder = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run_folder = run_folder.parent
    return DemoSnapshot(run_folder / "demo-content.snapshot")


@pytest.fixture(scope="module")
def demo_content(django_db_setup, django_db_blocker, _demo_snapshot):
    """The demo site's content, loaded and indexed (documents and passages), for a test module.

    It is written outside the per-test transactions, so the module's tests share it; like every row a module
    commits, it is removed after the module (``_module_leaves_the_database_as_it_found_it``).
    """
    with django_db_blocker.unblock():
        _demo_snapshot.load()
    state.invalidate()


@pytest.fixture
def fake_openai():
    """An OpenAI-compatible server on 127.0.0.1 that records requests (see tests/fake_openai.py)."""
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def shaped_openai():
    """The fake server with replies a test may reshape, headers on its failures and a delay (tests/fake_openai.py)."""
    from tests.fake_openai import ShapedOpenAI

    server = ShapedOpenAI().start()
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


#: The host the host tests serve the site on (tests/discovery/test_hosts.py, tests/discovery/test_front_door_hosts.py).
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


def pytest_collection_modifyitems(config, items):
    """Modules that start servers or workers go first: with the modules shared out among several workers
    (``make test``), a long module started last would keep one worker busy after the others are done."""
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow_modules)
