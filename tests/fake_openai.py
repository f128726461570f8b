"""A small OpenAI-compatible HTTP server for the tests, on 127.0.0.1 (the only thing the tests fake).

It records every request and answers ``/v1/chat/completions`` with what the test scripts (a function of the
request) and ``/v1/embeddings`` with deterministic bag-of-words vectors (refusing, with a 400 as the real API does,
an input over 8,192 tokens); it can fail the next N requests with
a status code to exercise retries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The real embedding models' input limit, in tokens.
MAX_INPUT_TOKENS = 8192


def approximate_tokens(text: str) -> int:
    """About what a BPE tokenizer makes of ``text``: a token per word, and one per three characters of a long run
    without spaces (base64, a URL)."""
    return sum(max(1, math.ceil(len(word) / 3)) for word in text.split())


def hashed_vector(text: str, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class FakeOpenAI:
    #: A reply with no choice at all (``"choices": []``), as a broken or filtering server sends.
    NO_CHOICES = object()

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.requests: list[dict[str, Any]] = []
        self.fail_next: list[int] = []  # status codes for the next requests
        self.reply: Callable[[dict[str, Any]], str] = lambda request: "The site says so [1]."
        self.usage_tokens = 42
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["json"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "json": payload, "headers": dict(self.headers)})
                if fake.fail_next:
                    status = fake.fail_next.pop(0)
                    self._send(status, {"error": {"message": "scripted failure", "type": "server_error"}})
                    return
                if self.path.endswith("/embeddings"):
                    inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
                    too_long = [i for i, text in enumerate(inputs) if approximate_tokens(text) > MAX_INPUT_TOKENS]
                    if too_long:  # as the real API refuses an input over the model's context
                        message = f"Input {too_long[0]} is longer than the maximum context length (8192 tokens)."
                        self._send(400, {"error": {"message": message, "type": "invalid_request_error"}})
                        return
                    data = [
                        {"object": "embedding", "index": i, "embedding": hashed_vector(text, fake.dimensions)}
                        for i, text in enumerate(inputs)
                    ]
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": data,
                            "model": payload.get("model"),
                            "usage": {"prompt_tokens": 1, "total_tokens": 1},
                        },
                    )
                elif self.path.endswith("/chat/completions"):
                    text = fake.reply(payload)
                    message = {"role": "assistant", "content": text}
                    choices = (
                        []
                        if text is FakeOpenAI.NO_CHOICES
                        else [{"index": 0, "finish_reason": "stop", "message": message}]
                    )
                    self._send(
                        200,
                        {
                            "id": "chatcmpl-test",
                            "object": "chat.completion",
                            "created": 0,
                            "model": payload.get("model"),
                            "choices": choices,
                            "usage": {
                                "prompt_tokens": fake.usage_tokens - 10,
                                "completion_tokens": 10,
                                "total_tokens": fake.usage_tokens,
                            },
                        },
                    )
                else:
                    self._send(404, {"error": {"message": "not found"}})

        return Handler


class ShapedOpenAI(FakeOpenAI):
    """The tests' fake server, with a chat completion's body a test may reshape (``shape``), a header sent with
    the scripted failures (``fail_headers``: Retry-After), and a delay before each chat reply (``delay``)."""

    def __init__(self) -> None:
        self.shape = lambda body: body
        self.fail_headers: dict[str, str] = {}
        self.delay = 0.0
        super().__init__()

    def _handler(self) -> type:
        fake = self
        base = super()._handler()

        class Handler(base):  # type: ignore[misc, valid-type]
            def send_response(self, code: int, message: str | None = None) -> None:
                super().send_response(code, message)
                if code >= 400:
                    for name, value in fake.fail_headers.items():
                        self.send_header(name, value)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                if self.path.endswith("/chat/completions"):
                    time.sleep(fake.delay)
                    if status == 200:
                        body = fake.shape(body)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    super()._send(status, body)

        return Handler
