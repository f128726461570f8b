"""The health endpoint: django-health-check's view with agent_handshake.health's checks, over real HTTP answers
from the embedding server and the broker (or their closed ports)."""

from __future__ import annotations

import pytest
from django.test import override_settings

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]

CHECK_NAMES = ("VectorDatabase(alias='default')", "Embeddings()", "IndexingBroker()")


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


def test_embedding_server_answering(client, fake_openai):
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
