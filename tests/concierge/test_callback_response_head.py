"""A callback receiver's answer is bounded in its head (status line and headers) as in its body: http.client alone
takes 100 header lines of 64 KiB each."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from django.conf import settings
from django.test import override_settings

from agent_handshake.concierge.callbacks import MAX_RESPONSE_HEAD_BYTES, deliver


def callback_settings(**values):
    return override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, **values})


class HeadServer:
    """A receiver on 127.0.0.1 that answers every request 200 with ``header_count`` headers of ``header_size``
    bytes each, and counts the bytes of its answer the client took."""

    def __init__(self, header_count: int, header_size: int) -> None:
        self.head = b"HTTP/1.1 200 OK\r\n" + b"".join(
            f"X-Filler-{index}: ".encode() + b"a" * header_size + b"\r\n" for index in range(header_count)
        )
        self.head += b"Content-Length: 2\r\nConnection: close\r\n\r\nok"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            connection.settimeout(5)
            connection.recv(65536)  # the request (small: one read)
            with contextlib.suppress(OSError):  # the client stopped reading: what is expected of it
                connection.sendall(self.head)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def head_server():
    started = []

    def start(header_count, header_size):
        server = HeadServer(header_count, header_size)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def test_a_response_with_megabytes_of_headers_is_not_read_whole(head_server):
    """http.client alone takes 100 header lines of 64 KiB each (6.4 MB held per delivery); the answer's head is
    bounded like its body, and a receiver that overruns it has not taken the callback."""
    server = head_server(header_count=90, header_size=60_000)
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=["127.0.0.1/32"], CALLBACK_REQUIRE_HTTPS=False):
        result = deliver(f"http://127.0.0.1:{server.port}/hook", b"{}", {})
    assert not result.delivered
    assert result.status is None
    assert f"response headers over {MAX_RESPONSE_HEAD_BYTES} bytes" in result.error
    assert result.retryable


def test_a_response_with_ordinary_headers_is_delivered(head_server):
    """Headers just under the bound (with the status line) still make a delivery."""
    server = head_server(header_count=10, header_size=(MAX_RESPONSE_HEAD_BYTES - 200) // 10 - 20)
    assert len(server.head) < MAX_RESPONSE_HEAD_BYTES
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=["127.0.0.1/32"], CALLBACK_REQUIRE_HTTPS=False):
        result = deliver(f"http://127.0.0.1:{server.port}/hook", b"{}", {})
    assert (result.delivered, result.status, result.error, result.response_excerpt) == (True, 200, "", b"ok")
