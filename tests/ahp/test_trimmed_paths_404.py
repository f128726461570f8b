"""``/capabilities`` and ``/agent/converse/status/`` with no name or job id reached the site's own routes: an HTML 404
(the demo site's ``<slug:slug>/`` page route), and with APPEND_SLASH a redirect to it, which for a ``POST`` under
DEBUG is Django's RuntimeError, a 500. They are AHP paths an agent trims a URL to: AHP's JSON 404, saying where the
resource is, without becoming endpoints of /openapi.json."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PATHS = ["/capabilities", "/capabilities/", "/agent/converse/status", "/agent/converse/status/"]


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("append_slash", [True, False])
@pytest.mark.parametrize("method", ["GET", "POST", "HEAD", "DELETE"])
@pytest.mark.parametrize("path", PATHS)
def test_a_path_without_its_name_or_id_is_ahps_json_404(settings, path, method, append_slash, debug):
    settings.APPEND_SLASH = append_slash
    settings.DEBUG = debug
    client = Client(enforce_csrf_checks=True, raise_request_exception=True)
    response = client.generic(method, path, b"{}", content_type="application/json")
    assert response.status_code == 404, response.content[:200]
    assert response["Content-Type"] == "application/json"
    assert "X-RateLimit-Limit" in response
    if method == "HEAD":
        return
    body = response.json()
    assert body["status"] == "error"
    if path.startswith("/capabilities"):
        assert body["code"] == "unknown_capability"
        assert "content_search" in body["available_capabilities"]
        assert "/capabilities/<name>" in body["message"]
    else:
        assert body["reason"] == "unknown_session"
        assert "/agent/converse/status/<session_id>" in body["message"]


def test_they_are_no_endpoints_of_the_published_documents(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.rstrip("/") in ("/capabilities", "/agent/converse/status")]
    assert any(path.startswith("/capabilities/") for path in paths)  # the capabilities themselves still are
    manifest = client.get("/.well-known/agent.json").content.decode()
    assert '/capabilities"' not in manifest
    assert '/agent/converse/status"' not in manifest
