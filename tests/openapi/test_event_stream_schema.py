"""NLWeb's streamed answers as ``/openapi.json`` describes them: for ``text/event-stream``, OpenAPI 3.2's
``itemSchema`` (a media type's ``schema`` in 3.0 and 3.1, as schemathesis reads it) describes one event, its
fields parsed as the HTML specification does (``event``, ``data``...). It said ``{"type": "string"}``, which no
parsed event is: every client that validates events (schemathesis among them) refused every stream."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.openapi.test_openapi import document, resolve  # noqa: F401  (document is a fixture)

pytestmark = pytest.mark.django_db


def parsed(stream: str) -> list[dict[str, str]]:
    """The events of an SSE body, each a dict of its fields (HTML's event stream interpretation, no ``id``)."""
    events = []
    for block in stream.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = f"{fields[name]}\n{value}" if name in fields else value
        if "data" in fields:
            events.append(fields)
    return events


@pytest.mark.parametrize("query", ["How hot should the water be for gyokuro?", "zzzq xqzz"])
def test_every_streamed_event_is_one_the_document_describes(client, document, query):  # noqa: F811
    body = {"query": {"text": query}, "prefer": {"streaming": True}}
    response = client.post("/ask", json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    events = parsed(b"".join(response.streaming_content).decode())
    assert events[0]["event"] == "start"
    schema = document["paths"]["/ask"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    for event in events:
        jsonschema.validate(event, resolve(document, schema))
        json.loads(event["data"])  # one line of JSON, as the description says
    for path in ("/ask", "/await"):
        for status, response in document["paths"][path]["post"]["responses"].items():
            if "text/event-stream" in response.get("content", {}):
                assert response["content"]["text/event-stream"]["schema"] == schema, (path, status)
