"""Server-Sent Events for any front door: each event reaches the client when it is written.

Three things stand between a generator of events and a client that sees them as they come, and
:func:`event_stream` deals with each:

- **ASGI.** Django serves a *synchronous* iterator under ASGI by collecting it into a list first (and an
  asynchronous one under WSGI likewise), so the events would all arrive at the end. The response's iterator is
  chosen by the server that runs the request: under ASGI an asynchronous one that advances the synchronous
  generator one event at a time in the request's thread (``sync_to_async(thread_sensitive=True)``, where Django
  runs sync views and their database connections).
- **Compression.** ``GZipMiddleware`` compresses a streamed response without flushing, so small events wait in
  the compressor until the stream ends. When the client accepts gzip, the stream is compressed here with a sync
  flush after every event (``Content-Encoding: gzip`` then tells the middleware to leave it alone); otherwise it
  is sent as it is. "Accepts" is read as RFC 9110 §12.5.3 says: ``gzip`` (or ``x-gzip``), else ``*``, with a
  q-value above 0. (``GZipMiddleware`` looks for the word "gzip" anywhere in the header, so where it is installed
  a client that sends ``gzip;q=0`` is still sent gzip: by the middleware, unflushed.)
- **Proxies.** ``Cache-Control: no-cache`` and ``X-Accel-Buffering: no`` ask caches and nginx not to hold it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_header_parameters

CONTENT_TYPE = "text/event-stream; charset=utf-8"
#: RFC 9110 §8.4.1.3: a recipient should read "x-gzip" as "gzip".
_GZIP = frozenset({"gzip", "x-gzip"})
_DONE = object()


#: Line breaks to Unicode but not to JSON, which leaves them raw: escaped, they keep an event one line for clients
#: that split lines as Unicode does (``str.splitlines()``); the SSE spec splits on CR and LF only.
UNICODE_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


#: One event as OpenAPI describes a ``text/event-stream`` response (3.2's ``itemSchema``; 3.0 and 3.1 tools such as
#: schemathesis read a media type's ``schema`` so): its fields as the HTML specification parses them, the data one
#: line of JSON. :func:`event` sends no other name.
EVENT_NAMES = ("start", "result", "content", "elicitation", "promise", "complete", "failure", "end")
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One Server-Sent Event: its name, and its data as one line of JSON.",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": list(EVENT_NAMES)},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


def event(name: str, data: Any) -> bytes:
    """One event: its name and its data as one line of JSON (JSON escapes CR and LF, and we the line breaks it
    does not, :data:`UNICODE_LINE_BREAKS`: one ``data:`` line)."""
    if name not in EVENT_NAMES:  # the API document lists them (EVENT_SCHEMA)
        raise ValueError(f"{name!r} is not an event the API document describes")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).translate(UNICODE_LINE_BREAKS)
    return f"event: {name}\ndata: {payload}\n\n".encode()


def accepts_event_stream(request: HttpRequest) -> bool:
    """Whether the request's ``Accept`` header asks for an event stream: names it (a wildcard such as ``*/*``
    accepts the JSON answer as well) with a quality above 0, and ranks JSON no higher (a tie is a stream)."""
    try:
        stream = request.accepted_type(CONTENT_TYPE)  # the best match with q > 0, the most specific first
        json_answer = request.accepted_type("application/json")
    except ValueError:  # a parameter Django's header parser refuses (an RFC 2231 charset it does not know)
        return False
    if stream is None or stream.sub_type != "event-stream":
        return False
    return json_answer is None or stream.quality >= json_answer.quality


def _accepts_gzip(request: HttpRequest) -> bool:
    """Whether the request's ``Accept-Encoding`` accepts gzip with a q-value above 0 (RFC 9110 §12.5.3); no header,
    or a q-value that is not one, is read as no, since an uncompressed stream is what every client reads."""
    qualities: dict[str, float] = {}
    for token in request.headers.get("Accept-Encoding", "").split(","):
        try:
            coding, params = parse_header_parameters(token)
        except ValueError:  # a parameter the parser refuses: that coding is not read
            continue
        try:
            quality = float(params.get("q", "1"))
        except ValueError:
            quality = 0.0
        qualities[coding] = quality if 0 <= quality <= 1 else 0.0
    named = [qualities[coding] for coding in _GZIP if coding in qualities]
    quality = max(named) if named else qualities.get("*", 0.0)
    return quality > 0


def _gzip(events: Iterable[bytes]) -> Iterator[bytes]:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: a gzip header and trailer
    for chunk in events:
        yield compressor.compress(chunk) + compressor.flush(zlib.Z_SYNC_FLUSH)
    yield compressor.flush()


async def _one_at_a_time(events: Iterator[bytes]) -> AsyncIterator[bytes]:
    advance = sync_to_async(next, thread_sensitive=True)
    while True:
        chunk = await advance(events, _DONE)
        if chunk is _DONE:
            return
        yield chunk


def event_stream(request: HttpRequest, events: Iterable[bytes], status: int = 200) -> StreamingHttpResponse:
    """A streamed ``text/event-stream`` response of ``events`` (see the module docstring)."""
    django_request = getattr(request, "_request", request)  # a DRF Request wraps Django's
    stream: Iterator[bytes] = iter(events)
    gzipped = _accepts_gzip(django_request)
    if gzipped:
        stream = _gzip(stream)
    content: Iterator[bytes] | AsyncIterator[bytes] = (
        _one_at_a_time(stream) if isinstance(django_request, ASGIRequest) else stream
    )
    response = StreamingHttpResponse(content, status=status, content_type=CONTENT_TYPE)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    if gzipped:
        response.headers["Content-Encoding"] = "gzip"
    patch_vary_headers(response, ("Accept", "Accept-Encoding"))
    return response
