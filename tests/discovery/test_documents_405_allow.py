"""The read-only documents (agent.json, llms.txt, llms-full.txt, robots.txt, intentmanifest.yaml, openapi.json):
a wrong method's 405 said ``Allow: GET, HEAD`` while their OPTIONS answer said ``GET, HEAD, OPTIONS``; RFC 9110
§15.5.6 has a 405's Allow list the methods the resource supports, which OPTIONS is one of."""

from __future__ import annotations

import pytest

from tests.discovery.test_cors_exposed_headers import DOCUMENTS as PUBLIC_DOCUMENTS
from tests.discovery.test_cors_exposed_headers import METADATA

pytestmark = pytest.mark.django_db

#: The documents of views.py (the RFC 9728 metadata is tested in tests/mcp/test_resource_metadata_methods.py).
DOCUMENTS = [path for path in PUBLIC_DOCUMENTS if path != METADATA]


def methods(header: str) -> list[str]:
    return [name.strip() for name in header.split(",")]


@pytest.mark.parametrize("path", DOCUMENTS)
@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_a_documents_405_allows_what_its_options_answer_allows(documents_client, path, method):
    options = documents_client.options(path)
    assert options.status_code == 200
    response = documents_client.generic(method, path, b"{}", content_type="application/json")
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert (body["status"], body["code"]) == ("error", "method_not_allowed")
    assert methods(response["Allow"]) == methods(options["Allow"]) == ["GET", "HEAD", "OPTIONS"]
    assert body["allowed_methods"] == methods(response["Allow"])
    # The message still says what reads the document.
    assert body["message"].endswith("use GET, HEAD.")
