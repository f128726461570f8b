"""An event's data stays one line for every client: JSON leaves U+2028 and U+2029 (line and paragraph separators)
and U+0085 (next line) as they are, and clients that split lines as Unicode does (Python's ``str.splitlines()``,
some event-stream libraries) cut the event there, losing it. Editors' text pasted from a word processor holds
U+2028 often, and a question may too. The SSE spec splits on CR and LF only, so escaping them changes nothing for a
client that follows it: the JSON decodes to the same text."""

from __future__ import annotations

import json

import pytest

from agent_handshake import sse

SEPARATORS = "\u2028\u2029\u0085"


@pytest.mark.parametrize("separator", SEPARATORS)
def test_an_event_escapes_unicode_line_separators_in_its_data(separator):
    """What the streams of /ask, /await and MCP are made of: an item's text from the site (a pasted U+2028) and a
    caller's words echoed back come out escaped, and decode to the same text."""
    data = {"text": f"Steep 3 minutes.{separator}Then pour.", "list": [separator]}
    raw = sse.event("result", data).decode()
    assert separator not in raw
    assert raw.splitlines() == ["event: result", raw.splitlines()[1], ""]  # one data line
    assert json.loads(raw.splitlines()[1].removeprefix("data: ")) == data
