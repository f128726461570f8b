"""Every AHP endpoint's 405 names, in ``Allow``, the methods its OPTIONS answer names: RFC 9110 §15.5.6 says a 405's
``Allow`` lists the methods the resource supports, and OPTIONS is one of them. The POST endpoints said ``POST`` in
their 405 and ``POST, OPTIONS`` to OPTIONS; the status URL ``GET, HEAD`` and ``GET, HEAD, OPTIONS``."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

#: (path, a method it refuses, the methods an agent uses there)
ENDPOINTS = [
    ("/agent/converse", "GET", ["POST"]),
    ("/agent/converse/", "PUT", ["POST"]),
    ("/capabilities/content_search", "GET", ["POST"]),
    ("/agent/handshake", "DELETE", ["POST"]),
    ("/agent/handshake/verify", "PATCH", ["POST"]),
    ("/agent/converse/status/some-job", "POST", ["GET", "HEAD"]),
]


def methods(header: str) -> list[str]:
    return [name.strip() for name in header.split(",")]


@pytest.mark.parametrize(("path", "refused", "used"), ENDPOINTS, ids=[endpoint[0] for endpoint in ENDPOINTS])
def test_an_ahp_endpoints_405_allows_what_its_options_answer_allows(path, refused, used):
    client = Client(enforce_csrf_checks=True)
    options = client.options(path)
    assert options.status_code == 200
    response = client.generic(refused, path, b"{}", content_type="application/json")
    assert response.status_code == 405
    body = response.json()
    assert (body["status"], body["code"]) == ("error", "method_not_allowed")
    assert methods(response["Allow"]) == methods(options["Allow"])
    assert "OPTIONS" in methods(response["Allow"])
    assert body["allowed_methods"] == methods(response["Allow"])
    # The message still tells an agent what to send here (the methods that do the work).
    assert f"use {', '.join(used)}." in body["message"]
