"""The public documents are sent to pages on any origin (``Access-Control-Allow-Origin: *``), but their errors were
not: a wrong method's JSON 405 (agent.json, llms.txt, llms-full.txt, robots.txt, intentmanifest.yaml, openapi.json,
the RFC 9728 metadata) and intentmanifest.yaml's 503 while the site key does not load had no CORS header, so the
browser handed a page on another origin a network error instead of the JSON saying what was wrong."""

from __future__ import annotations

import pytest

from tests.discovery.test_cors_exposed_headers import DOCUMENTS, PAGE
from tests.discovery.test_front_door_hosts import assert_site_key_unavailable

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", DOCUMENTS)
def test_a_documents_405_is_readable_by_a_page_on_another_origin(documents_client, path):
    # A form-like POST is a "simple" request: the browser sends it without a preflight and shows the page the answer
    # only if it carries Access-Control-Allow-Origin.
    response = documents_client.post(path, "x", content_type="text/plain", HTTP_ORIGIN=PAGE)
    assert response.status_code == 405
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response.json()["code"] == "method_not_allowed"


def test_the_intent_manifests_503_is_readable_by_a_page_on_another_origin(documents_client, host_site):
    host_site.AGENT_HANDSHAKE = {**host_site.AGENT_HANDSHAKE, "SITE_PRIVATE_KEY": "garbage"}
    response = documents_client.get("/intentmanifest.yaml", HTTP_ORIGIN=PAGE)
    assert_site_key_unavailable(response)
    assert response["Access-Control-Allow-Origin"] == "*"
