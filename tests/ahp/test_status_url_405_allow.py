"""The job status URL answers GET and HEAD (a poll's headers alone): its 405 said only GET, in ``Allow`` and in the
message, although the same resource serves HEAD, as the OPTIONS answer says. RFC 9110 §15.5.6: a 405's ``Allow``
lists the methods the resource supports."""

from __future__ import annotations

import pytest

from agent_handshake.models import AgentClient, ApiKey

pytestmark = pytest.mark.django_db

STATUS = "/agent/converse/status/some-job"


def methods(header: str) -> set[str]:
    return {name.strip() for name in header.split(",")}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_the_status_urls_405_names_every_method_it_serves(client, method):
    agent, _ = AgentClient.objects.get_or_create(name="Poller")
    secret = ApiKey.objects.issue(agent, scopes=["*"])[1]
    refused = client.generic(method, STATUS, b"", headers={"Authorization": f"Bearer {secret}"})
    assert refused.status_code == 405
    body = refused.json()
    assert (body["status"], body["code"]) == ("error", "method_not_allowed")
    assert methods(refused["Allow"]) == {"GET", "HEAD", "OPTIONS"}
    assert body["allowed_methods"] == ["GET", "HEAD", "OPTIONS"]
    assert "GET, HEAD" in body["message"]
    # ... which it does serve: HEAD is answered as GET is (here: no such job), without a body.
    head = client.head(STATUS, headers={"Authorization": f"Bearer {secret}"})
    get = client.get(STATUS, headers={"Authorization": f"Bearer {secret}"})
    assert head.status_code == get.status_code == 404
    assert head.content == b""
    assert methods(client.options(STATUS)["Allow"]) >= {"GET", "HEAD"}
