"""The health endpoint: django-health-check's view with agent_handshake.health's checks, over real HTTP answers
from the embedding server and the broker (or their closed ports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]

ROOT = Path(__file__).resolve().parents[2]
CHECK_NAMES = ("VectorDatabase(alias='default')", "Migrations(alias='default')", "Embeddings()", "IndexingBroker()")


def health_in_a_process(tmp_path, *args: str, **env: str) -> list[dict]:
    """``/health/``'s status and body from a process of its own, with ``env`` over this one's environment (e.g.
    ``DATABASE_URL``): one probe, or with ``--migrate-then-probe`` a second one after ``migrate agent_handshake``."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "AGENT_HANDSHAKE_QUEUE_DIR": str(tmp_path), **env}
    done = subprocess.run(
        [sys.executable, "-c", HEALTH_IN_A_PROCESS, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.strip().splitlines() if line.startswith("{")]


def health(client) -> tuple[int, dict[str, str]]:
    response = client.get("/health/", headers={"accept": "application/json"})
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    return response.status_code, response.json()


def test_healthy_node(client):
    status, body = health(client)
    assert (status, body) == (200, dict.fromkeys(CHECK_NAMES, "OK"))


def test_embedding_server_unreachable(client, closed_port):
    embeddings = {
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": f"http://127.0.0.1:{closed_port}/v1", "max_retries": 0, "timeout": 2},
    }
    with override_settings(AGENT_HANDSHAKE=embeddings):
        status, body = health(client)
    assert status == 500
    assert body["Embeddings()"] == "Unavailable: The embedding backend cannot embed"
    assert body["VectorDatabase(alias='default')"] == body["IndexingBroker()"] == "OK"
    assert str(closed_port) not in str(body)  # the cause is logged, not published


@pytest.mark.django_db(transaction=True)  # the checks run in threads, on connections of their own
def test_embedding_server_answering(client, fake_openai):
    from agent_handshake.models import EmbeddingIndex

    # No passages of another model's (an earlier module's index, committed, would make the node rightly unhealthy).
    EmbeddingIndex.objects.all().delete()
    embeddings = {
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": fake_openai.base_url, "max_retries": 0},
    }
    with override_settings(AGENT_HANDSHAKE=embeddings):
        status, body = health(client)
    assert (status, body["Embeddings()"]) == (200, "OK")


def test_celery_indexing_with_an_unreachable_broker(client, celery_app, closed_port):
    celery_app(broker_url=f"amqp://guest:guest@127.0.0.1:{closed_port}//")
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "celery"}):
        status, body = health(client)
    assert status == 500
    assert body["IndexingBroker()"] == "Unavailable: The Celery broker that indexing uses cannot be reached"


def test_celery_indexing_with_a_reachable_broker(client, celery_app, tmp_path):
    celery_app(
        broker_url="filesystem://",
        broker_transport_options={"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)},
    )
    with override_settings(AGENT_HANDSHAKE={"INDEX_ON_SAVE": "auto"}):
        status, body = health(client)
    assert (status, body["IndexingBroker()"]) == (200, "OK")


HEALTH_IN_A_PROCESS = """
import json
import sys

import django

django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings


def probe():
    # As the README advises: probes get no discovery headers, so the middleware never reads the database for them.
    exempt = {**settings.AGENT_HANDSHAKE, "EXEMPT_PATHS": [r"^/health/"]}
    with override_settings(ROOT_URLCONF="tests.health_urls", AGENT_HANDSHAKE=exempt):
        response = Client().get("/health/", headers={"accept": "application/json"})
    print(json.dumps({"status": response.status_code, "body": response.json()}))


probe()
if "--migrate-then-probe" in sys.argv:
    call_command("migrate", "agent_handshake", verbosity=0)
    probe()
"""


@pytest.mark.slow
@pytest.mark.django_db(databases=[])
def test_database_without_the_vector_extension(database_without_pgvector, tmp_path):
    """The machine's PostgreSQL 15 answers but has no pgvector: the node cannot serve agents."""
    [result] = health_in_a_process(tmp_path, DATABASE_URL=database_without_pgvector)
    assert result["status"] == 500
    assert (
        result["body"]["VectorDatabase(alias='default')"]
        == "Unavailable: The vector extension is not installed (run migrate)"
    )
    assert result["body"]["Embeddings()"] == result["body"]["IndexingBroker()"] == "OK"


@pytest.mark.django_db(transaction=True)  # the checks run in threads, on connections of their own
def test_embedding_model_changed_since_the_passages_were_embedded(client, fake_openai):
    """Another model than the passages' (no ``agent_reindex --rebuild`` yet): every search answers 503, so the node
    is not healthy although the new model embeds."""
    from agent_handshake.models import EmbeddingIndex

    EmbeddingIndex.objects.create(model_id="sentence-transformers/all-MiniLM-L6-v2", dimensions=384)
    embeddings = {
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": fake_openai.base_url, "max_retries": 0},
    }
    with override_settings(AGENT_HANDSHAKE=embeddings):
        status, body = health(client)
    assert status == 500
    assert body["Embeddings()"] == (
        "Unavailable: The passages hold another model's vectors (run agent_reindex --rebuild)"
    )


def test_embedding_server_answering_with_vectors_of_another_size(client, fake_openai):
    """A server that ignores the configured ``dimensions`` (the fake one gives 64) cannot fill the index."""
    embeddings = {
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": fake_openai.base_url, "max_retries": 0, "dimensions": 32},
    }
    with override_settings(AGENT_HANDSHAKE=embeddings):
        status, body = health(client)
    assert status == 500
    assert body["Embeddings()"] == "Unavailable: The embedding backend returned vectors of another size"


@pytest.mark.django_db(databases=[])
def test_an_unknown_database_host_is_not_published(tmp_path):
    """The database's address stays in the log: django-health-check's own message names a host it cannot resolve."""
    [result] = health_in_a_process(
        tmp_path, DATABASE_URL="postgres://site:secret@db-primary.internal.invalid:5432/site"
    )
    assert result["status"] == 500
    assert result["body"]["VectorDatabase(alias='default')"] == "Unavailable: Could not connect to the database"
    assert "internal" not in json.dumps(result["body"])


@pytest.mark.django_db(transaction=True)  # the checks run in threads, on connections of their own
def test_a_probe_leaves_no_database_connection_open(client):
    """A load balancer probes every few seconds: each probe's checks must close the connections they open (the
    embeddings check reads the index in a thread of its own, whose connection nothing else closes)."""
    from django.db import connection

    def open_connections() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            return cursor.fetchone()[0]

    before = open_connections()
    for _ in range(5):
        assert health(client)[0] == 200
    assert open_connections() <= before


@pytest.mark.django_db(transaction=True)  # the migrations' DDL must be committed for the other process to see it
def test_unapplied_migrations(client, tmp_path):
    """A deployment whose migrate step failed: a node that starts on a database one migration of agent_handshake
    behind would answer agents with 500s, so it is unhealthy; once migrate has run, the same process is healthy
    again (an unhealthy result is not remembered). A healthy result is: this process, healthy before, does not
    build the migration graph again on its later probes, so it does not see the step back."""
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    graph = MigrationLoader(connection).graph
    [latest] = graph.leaf_nodes("agent_handshake")
    [previous] = [parent for parent in graph.node_map[latest].parents if parent[0] == "agent_handshake"]
    assert health(client) == (200, dict.fromkeys(CHECK_NAMES, "OK"))
    call_command("migrate", *previous, verbosity=0)
    try:
        remembered = health(client)
        unmigrated, migrated = health_in_a_process(
            tmp_path, "--migrate-then-probe", AGENT_HANDSHAKE_DB_NAME=connection.settings_dict["NAME"]
        )
    finally:
        call_command("migrate", "agent_handshake", verbosity=0)
    assert remembered == (200, dict.fromkeys(CHECK_NAMES, "OK"))
    assert unmigrated["status"] == 500
    assert unmigrated["body"]["Migrations(alias='default')"] == (
        f"Unavailable: Migrations from {latest[0]}.{latest[1]} on are not applied (run migrate)"
    )
    assert unmigrated["body"]["VectorDatabase(alias='default')"] == "OK"
    assert migrated == {"status": 200, "body": dict.fromkeys(CHECK_NAMES, "OK")}
