"""``/.well-known/oauth-protected-resource/mcp`` (RFC 9728) is a read-only JSON document, as agent.json is: a wrong
method gets a JSON 405 whose ``Allow`` names what the OPTIONS answer names (RFC 9110 §15.5.6). POST, PUT, DELETE
and PATCH got CSRF's HTML 403 page (a plain Django view, not exempt), and any other method Django's empty
``text/html`` 405."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

METADATA = "/.well-known/oauth-protected-resource/mcp"


def methods(header: str) -> list[str]:
    return [name.strip() for name in header.split(",")]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND"])
def test_a_wrong_method_gets_a_json_405_with_allow(method):
    client = Client(enforce_csrf_checks=True)
    allowed = methods(client.options(METADATA)["Allow"])
    assert allowed == ["GET", "HEAD", "OPTIONS"]
    response = client.generic(method, METADATA, b"{}", content_type="application/json")
    assert response.status_code == 405, response.content[:200]
    assert response["Content-Type"] == "application/json"
    assert methods(response["Allow"]) == allowed
    body = response.json()
    assert (body["status"], body["code"]) == ("error", "method_not_allowed")
    assert body["allowed_methods"] == allowed
    assert "use GET, HEAD." in body["message"]


def test_get_still_serves_the_metadata():
    response = Client(enforce_csrf_checks=True).get(METADATA)
    assert response.status_code == 200
    assert response.json()["resource"] == "http://testserver/mcp"
