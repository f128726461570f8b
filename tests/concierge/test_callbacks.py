"""Callback delivery (AHP §9, §13): URL checks against SSRF, and real deliveries to servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agent_handshake.concierge.callbacks import (
    USER_AGENT,
    CheckedURL,
    UnsafeCallbackURL,
    address_refusal,
    check_callback_url,
    deliver,
    embedded_ipv4,
    sign,
    verify,
)


def callback_settings(**values: Any):
    return override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, **values})


@pytest.fixture
def strict():
    """HTTPS required and no network excepted, whatever tests/settings.py says."""
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=[], CALLBACK_REQUIRE_HTTPS=True):
        yield


@pytest.fixture
def plain_http():
    """Plain HTTP allowed (so the receivers could be reached) but no network excepted: every refusal is ours."""
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=[], CALLBACK_REQUIRE_HTTPS=False):
        yield


@pytest.fixture
def local():
    """The receivers on 127.0.0.1 are reachable."""
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=["127.0.0.1/32"], CALLBACK_REQUIRE_HTTPS=False):
        yield


class Receiver:
    """An HTTP(S) server on 127.0.0.1 that counts connections, records requests and answers as told."""

    def __init__(
        self,
        status: int = 200,
        body: bytes = b"ok",
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        trickle: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.status, self.body, self.headers = status, body, headers or {}
        self.delay, self.trickle = delay, trickle
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self.server_names: list[str | None] = []
        self.released = threading.Event()
        receiver = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request, client_address) -> bool:
                receiver.connections += 1
                return True

            def handle_error(self, request, client_address) -> None:
                pass  # clients that stop reading (size cap, timeouts) are expected here

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                receiver.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": self.headers,
                        "body": self.rfile.read(length),
                    }
                )
                if receiver.delay and receiver.released.wait(receiver.delay):
                    return
                self.send_response(receiver.status)
                for name, value in receiver.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(receiver.body)))
                self.end_headers()
                if not receiver.trickle:
                    self.wfile.write(receiver.body)
                    return
                for index in range(len(receiver.body)):
                    self.wfile.write(receiver.body[index : index + 1])
                    if receiver.released.wait(0.1):
                        return

            do_GET = do_PUT = do_POST

        self._server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda ssl_socket, name, context: self.server_names.append(name)
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str = "/hook", *, scheme: str = "http", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def receiver():
    started: list[Receiver] = []

    def start(**options: Any) -> Receiver:
        server = Receiver(**options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def assert_never_contacted(server: Receiver) -> None:
    time.sleep(0.2)  # a connection, had there been one, would have been accepted by now
    assert server.connections == 0
    assert server.requests == []


def teredo(server: str, client: str) -> str:
    obfuscated = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | (0x8000 << 48) | (0x63BF << 32)
    return str(ipaddress.IPv6Address(value | obfuscated))


REFUSED = [
    ("https://127.0.0.1/", "loopback"),
    ("https://10.1.2.3/", "private"),
    ("https://172.16.0.1/", "private"),
    ("https://192.168.1.1/", "private"),
    ("https://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://100.64.0.1/", "shared address space"),
    ("https://0.0.0.0/", "unspecified"),
    ("https://224.0.0.1/", "multicast"),
    ("https://240.0.0.1/", "reserved"),
    ("https://255.255.255.255/", "reserved"),
    ("https://192.0.2.10/", "not globally routable"),  # documentation range
    ("https://[::1]/", "loopback"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[fc00::1]/", "private"),
    ("https://[fd12:3456::1]/", "private"),
    ("https://[ff02::1]/", "multicast"),
    ("https://[::]/", "unspecified"),
    ("https://[2001:db8::1]/", "not globally routable"),
    ("https://[::ffff:127.0.0.1]/", "loopback"),
    ("https://[::ffff:10.0.0.1]/", "private"),
    ("https://[::ffff:7f00:1]/", "loopback"),
    ("https://[::127.0.0.1]/", "loopback"),  # IPv4-compatible
    ("https://[2002:7f00:1::]/", "loopback"),  # 6to4
    ("https://[2002:a9fe:a9fe::1]/", "link-local"),  # 6to4 of 169.254.169.254
    ("https://[64:ff9b::a00:1]/", "private"),  # NAT64 of 10.0.0.1
    ("https://[64:ff9b::127.0.0.1]/", "loopback"),
    (f"https://[{teredo('65.54.227.120', '10.0.0.1')}]/", "private"),
    (f"https://[{teredo('127.0.0.1', '8.8.8.8')}]/", "loopback"),
]


@pytest.mark.usefixtures("strict")
@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_refused_addresses(url, reason):
    with pytest.raises(UnsafeCallbackURL, match=re.escape(reason)):
        check_callback_url(url)
    with pytest.raises(UnsafeCallbackURL, match=re.escape(reason)):
        check_callback_url(url, resolve=False)  # literals are checked without DNS too


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.216.34", "2002:5db8:d822::1"]
)
def test_public_addresses_are_allowed(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_embedded_ipv4():
    def embedded(address):
        return [str(a) for a in embedded_ipv4(ipaddress.IPv6Address(address))]

    assert embedded("::ffff:7f00:1") == ["127.0.0.1"]
    assert embedded("::127.0.0.1") == ["127.0.0.1"]
    assert embedded("2002:c0a8:101::") == ["192.168.1.1"]
    assert embedded("64:ff9b::808:808") == ["8.8.8.8"]
    assert embedded(teredo("65.54.227.120", "10.0.0.1")) == ["65.54.227.120", "10.0.0.1"]
    assert embedded("2606:4700::1111") == []


@pytest.mark.usefixtures("strict")
def test_refusal_message_names_the_embedded_ipv4():
    with pytest.raises(UnsafeCallbackURL) as refused:
        check_callback_url("https://[::ffff:7f00:1]/")
    assert str(refused.value) == (
        "callback URL refused: host ::ffff:7f00:1 is loopback (it reaches IPv4 127.0.0.1); "
        "callbacks go only to publicly routable addresses"
    )


NUMERIC_IPV4_TRICKS = ["2130706433", "0x7f.1", "0x7f000001", "017700000001", "0177.0.0.1", "127.1", "127.0.0.1."]


@pytest.mark.usefixtures("plain_http")
@pytest.mark.parametrize("host", NUMERIC_IPV4_TRICKS)
def test_non_standard_ipv4_forms_are_never_connected(receiver, host):
    server = receiver()
    url = server.url(host=host)
    for resolve in (True, False):
        with pytest.raises(UnsafeCallbackURL, match="non-standard form"):
            check_callback_url(url, resolve=resolve)
    result = deliver(url, b"{}", {})
    assert (result.delivered, result.status, result.retryable, result.address) == (False, None, False, None)
    assert_never_contacted(server)


@pytest.mark.usefixtures("plain_http")
def test_name_resolving_to_loopback_is_refused(receiver):
    with pytest.raises(UnsafeCallbackURL, match=r"'localhost' resolves to .*loopback"):
        check_callback_url("https://localhost/hook")
    server = receiver()
    result = deliver(server.url(host="localhost"), b"{}", {})
    assert not result.delivered
    assert not result.retryable
    assert result.error.startswith("refused: ")
    assert_never_contacted(server)


@pytest.mark.usefixtures("strict")
def test_name_that_does_not_resolve_is_refused():
    with pytest.raises(UnsafeCallbackURL, match="does not resolve"):
        check_callback_url("https://no-such-host.invalid/hook")


@pytest.mark.usefixtures("strict")
def test_names_are_not_resolved_on_request():
    checked = check_callback_url("https://agent.example/hook", resolve=False)
    assert (checked.host, checked.addresses) == ("agent.example", [])


@pytest.mark.usefixtures("plain_http")
def test_refused_url_never_opens_a_connection(receiver):
    server = receiver()
    result = deliver(server.url(), b"{}", sign("s", b"{}"))
    assert result.delivered is False
    assert result.status is None
    assert result.retryable is False
    assert result.address is None
    assert "loopback" in result.error
    assert_never_contacted(server)


def test_http_needs_https_off():
    url = "http://93.184.216.34/hook"
    with callback_settings(CALLBACK_REQUIRE_HTTPS=True), pytest.raises(UnsafeCallbackURL, match="must be https"):
        check_callback_url(url, resolve=False)
    https_unless_debug = callback_settings(CALLBACK_REQUIRE_HTTPS=None)
    with https_unless_debug, override_settings(DEBUG=False), pytest.raises(UnsafeCallbackURL, match="must be https"):
        check_callback_url(url, resolve=False)
    with callback_settings(CALLBACK_REQUIRE_HTTPS=None), override_settings(DEBUG=True):
        assert check_callback_url(url, resolve=False).port == 80
    with callback_settings(CALLBACK_REQUIRE_HTTPS=False):
        assert check_callback_url(url, resolve=False).scheme == "http"


@pytest.mark.usefixtures("plain_http")
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://user:secret@93.184.216.34/", "credentials"),
        ("https://user@93.184.216.34/", "credentials"),
        ("https://@93.184.216.34/", "credentials"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://93.184.216.34:70/_GET", "scheme"),
        ("ftp://93.184.216.34/", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("//93.184.216.34/hook", "scheme"),
        ("https:///hook", "no host"),
        ("https://93.184.216.34:0/", "port"),
        ("https://93.184.216.34:99999/", "port"),
        ("https://93.184.216.34:http/", "port"),
        ("https://93.184.216.34/" + "a" * 2048, "longer than 2048"),
        ("https://93.184.216.34/hook\r\nX-Injected: 1", "control characters"),
        ("https://93.184.216.34/a b", "control characters"),
        ("https://exämple.com/", "ASCII"),
        ("https://[127.0.0.1]/", "malformed"),
        ("https://[fe80::1%25eth0]/", "link-local"),
        ("https://bad_host!.example/", "not a valid host name"),
    ],
)
def test_malformed_or_forbidden_urls(url, message):
    with pytest.raises(UnsafeCallbackURL, match=re.escape(message)):
        check_callback_url(url, resolve=False)


@pytest.mark.usefixtures("strict")
def test_public_literals_are_accepted():
    assert check_callback_url("https://93.184.216.34/hook?job=1#ignored", resolve=False) == CheckedURL(
        url="https://93.184.216.34/hook?job=1#ignored",
        scheme="https",
        host="93.184.216.34",
        port=443,
        path_with_query="/hook?job=1",
        addresses=["93.184.216.34"],
    )
    with callback_settings(CALLBACK_ALLOWED_PORTS=[443, 8443]):
        checked = check_callback_url("HTTPS://[2606:4700::1111]:8443", resolve=False)
    assert (checked.scheme, checked.host, checked.port, checked.path_with_query) == (
        "https",
        "2606:4700::1111",
        8443,
        "/",
    )
    assert checked.addresses == ["2606:4700::1111"]
    assert checked.host_header == "[2606:4700::1111]:8443"


def test_allowed_networks_except_only_what_they_list():
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=["127.0.0.1/32"], CALLBACK_REQUIRE_HTTPS=False):
        assert check_callback_url("http://127.0.0.1:8000/").addresses == ["127.0.0.1"]
        with pytest.raises(UnsafeCallbackURL, match="loopback"):
            check_callback_url("http://127.0.0.2:8000/")
        with pytest.raises(UnsafeCallbackURL, match="loopback"):
            check_callback_url("http://[::1]:8000/")


@pytest.mark.usefixtures("local")
def test_delivery_sends_exactly_what_was_given(receiver):
    server = receiver(body=b'{"received": true}')
    body = json.dumps({"job_id": "j-42", "status": "completed"}).encode()
    headers = {**sign("agent-secret", body), "X-Request-Id": "r-1", "Host": "evil.example", "User-Agent": "x"}
    result = deliver(server.url("/hook?job=42"), body, headers)

    assert result.delivered is True
    assert (result.status, result.error, result.retryable) == (200, "", False)
    assert result.address == "127.0.0.1"
    assert result.response_excerpt == b'{"received": true}'
    [request] = server.requests
    assert server.connections == 1
    assert (request["method"], request["path"], request["body"]) == ("POST", "/hook?job=42", body)
    received = request["headers"]
    assert received["Host"] == f"127.0.0.1:{server.port}"
    assert received.get_all("Host") == [f"127.0.0.1:{server.port}"]
    assert received["Content-Type"] == "application/json"
    assert received["Content-Length"] == str(len(body))
    assert received["User-Agent"] == USER_AGENT == "agent-handshake-callback/1"
    assert received["X-Request-Id"] == "r-1"
    assert received["X-AHP-Signature"] == headers["X-AHP-Signature"]
    assert verify("agent-secret", request["body"], received["X-AHP-Signature"])


@pytest.mark.usefixtures("local")
def test_redirects_are_not_followed(receiver):
    target = receiver()
    server = receiver(status=302, headers={"Location": target.url("/elsewhere")}, body=b"")
    result = deliver(server.url(), b"{}", {})
    assert (result.delivered, result.status, result.retryable) == (False, 302, False)
    assert result.error.startswith("redirect 302 not followed")
    assert len(server.requests) == 1
    assert_never_contacted(target)


@pytest.mark.usefixtures("local")
@pytest.mark.parametrize(
    ("status", "delivered", "retryable"),
    [
        (200, True, False),
        (201, True, False),
        (204, True, False),
        (301, False, False),
        (400, False, False),
        (404, False, False),
        (410, False, False),
        (408, False, True),
        (425, False, True),
        (429, False, True),
        (500, False, True),
        (503, False, True),
    ],
)
def test_status_decides_delivered_and_retryable(receiver, status, delivered, retryable):
    server = receiver(status=status, body=b"" if status == 204 else b"answer")
    result = deliver(server.url(), b"{}", {})
    assert (result.delivered, result.status, result.retryable) == (delivered, status, retryable)
    assert (result.error == "") is delivered
    if not delivered and status >= 400:
        assert result.error == f"HTTP {status}"


@pytest.mark.usefixtures("local")
def test_slow_response_times_out(receiver):
    server = receiver(delay=10)
    with callback_settings(CALLBACK_READ_TIMEOUT=0.5):
        started = time.monotonic()
        result = deliver(server.url(), b"{}", {})
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert (result.delivered, result.status, result.retryable) == (False, None, True)
    assert result.error == "timeout waiting for the response"
    assert result.address == "127.0.0.1"
    assert len(server.requests) == 1


@pytest.mark.usefixtures("local")
def test_read_timeout_bounds_the_whole_response(receiver):
    # One byte every 0.1 s: no single read waits long, the body as a whole would take 10 s.
    server = receiver(body=b"x" * 100, trickle=True)
    with callback_settings(CALLBACK_READ_TIMEOUT=0.5):
        started = time.monotonic()
        result = deliver(server.url(), b"{}", {})
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert (result.delivered, result.status) == (True, 200)  # the 2xx came back; the rest of the body is moot
    assert 0 < len(result.response_excerpt) < 100


@pytest.mark.usefixtures("local")
def test_response_body_is_capped(receiver):
    body = bytes(range(256)) * 20000  # about 5 MB
    server = receiver(body=body)
    with callback_settings(CALLBACK_MAX_RESPONSE_BYTES=1000):
        result = deliver(server.url(), b"{}", {})
    assert (result.delivered, result.status) == (True, 200)
    assert result.response_excerpt == body[:1000]


@pytest.mark.usefixtures("local")
def test_connection_refused_is_retryable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = deliver(f"http://127.0.0.1:{port}/hook", b"{}", {})
    assert (result.delivered, result.status, result.retryable, result.address) == (False, None, True, None)
    assert result.error.startswith("failed connecting: ConnectionRefusedError")


@pytest.mark.usefixtures("local")
@pytest.mark.parametrize("headers", [{"X-Evil": "a\r\nX-Injected: 1"}, {"Bad Name": "1"}, {"X-Empty:": "1"}])
def test_invalid_headers_are_refused_before_connecting(receiver, headers):
    server = receiver()
    result = deliver(server.url(), b"{}", headers)
    assert (result.delivered, result.retryable) == (False, False)
    assert "header" in result.error
    assert_never_contacted(server)


@pytest.fixture(scope="module")
def localhost_certificate(tmp_path_factory):
    """A self-signed certificate for localhost and 127.0.0.1: (certificate path, key path)."""
    if not shutil.which("openssl"):
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    certificate, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=localhost"),
            *(
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-keyout",
                str(key),
                "-out",
                str(certificate),
            ),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return certificate, key


def tls_server_context(localhost_certificate) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*localhost_certificate)
    return context


def test_https_delivery_verifies_the_host_name(receiver, localhost_certificate, monkeypatch):
    # Trust the test certificate the way an operator would trust a CA: through OpenSSL's default paths.
    monkeypatch.setenv("SSL_CERT_FILE", str(localhost_certificate[0]))
    server = receiver(tls=tls_server_context(localhost_certificate))
    loopback = ["127.0.0.1/32", "::1/128"]
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=loopback, CALLBACK_REQUIRE_HTTPS=True):
        result = deliver(server.url(scheme="https", host="localhost"), b'{"ok": 1}', {})
    assert (result.delivered, result.status, result.error) == (True, 200, ""), result.error
    assert result.address == "127.0.0.1"
    assert server.server_names == ["localhost"]  # SNI is the URL's host, though we connected to an address
    assert server.requests[0]["headers"]["Host"] == f"localhost:{server.port}"
    assert server.requests[0]["body"] == b'{"ok": 1}'


def test_https_refuses_an_untrusted_certificate(receiver, localhost_certificate):
    server = receiver(tls=tls_server_context(localhost_certificate))
    with callback_settings(CALLBACK_ALLOWED_NETWORKS=["127.0.0.1/32"], CALLBACK_REQUIRE_HTTPS=True):
        result = deliver(server.url(scheme="https"), b"{}", {})
    assert (result.delivered, result.status, result.address) == (False, None, "127.0.0.1")
    assert result.error.startswith("TLS certificate refused")
    assert server.requests == []


def test_sign_and_verify_round_trip():
    body = b'{"job_id": "j-1"}'
    headers = sign("s3cret", body, timestamp=1_700_000_000)
    expected = hmac.new(b"s3cret", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers == {"X-AHP-Signature": f"t=1700000000,v1={expected}"}
    assert verify("s3cret", body, headers["X-AHP-Signature"], now=1_700_000_000)
    assert verify("s3cret", body, headers["X-AHP-Signature"], now=1_700_000_300)
    assert verify("s3cret", body, sign("s3cret", body)["X-AHP-Signature"])  # now, by the clock


def test_verify_refuses_tampering_and_stale_signatures():
    body = b'{"job_id": "j-1", "status": "completed"}'
    header = sign("s3cret", body, timestamp=1_700_000_000)["X-AHP-Signature"]
    now = 1_700_000_010
    assert not verify("s3cret", body.replace(b"completed", b"failed"), header, now=now)
    assert not verify("other secret", body, header, now=now)
    assert not verify("s3cret", body, header, now=1_700_000_301)  # stale
    assert not verify("s3cret", body, header, now=1_699_999_000)  # from the future
    assert not verify("s3cret", body, header, now=1_700_000_100, tolerance=60)
    forged_time = header.replace("t=1700000000", "t=1700000010")
    assert not verify("s3cret", body, forged_time, now=now)
    for malformed in ["", "v1=abc", "t=1700000000", "t=abc,v1=def", "garbage", header.replace("v1=", "v2=")]:
        assert not verify("s3cret", body, malformed, now=now)


def test_verify_accepts_any_of_several_signatures():
    body = b"{}"
    current = sign("new secret", body, timestamp=1_700_000_000)["X-AHP-Signature"]
    rotated = current + ",v1=" + "0" * 64
    assert verify("new secret", body, rotated, now=1_700_000_000)


PUBLIC = "93.184.216.34"


def test_callbacks_go_only_to_the_standard_port_of_their_scheme_by_default():
    """A public address may run anything on its other ports (mail, databases, admin consoles): by default a callback
    reaches only 443 for https, or 80 for http."""
    with callback_settings(CALLBACK_REQUIRE_HTTPS=False, CALLBACK_ALLOWED_NETWORKS=[]):
        assert check_callback_url(f"https://{PUBLIC}/hook").port == 443
        assert check_callback_url(f"https://{PUBLIC}:443/hook").port == 443
        assert check_callback_url(f"http://{PUBLIC}/hook").port == 80
        for url in (
            f"https://{PUBLIC}:8443/",
            f"http://{PUBLIC}:25/",
            f"http://{PUBLIC}:443/",
            "https://[2606:4700::1111]:22/",
        ):
            with pytest.raises(UnsafeCallbackURL, match=r"callback URL port \d+ is refused"):
                check_callback_url(url)
            with pytest.raises(UnsafeCallbackURL, match="port"):
                check_callback_url(url, resolve=False)


def test_allowed_ports_can_be_listed_or_lifted():
    with callback_settings(CALLBACK_REQUIRE_HTTPS=True, CALLBACK_ALLOWED_PORTS=[443, 8443]):
        assert check_callback_url(f"https://{PUBLIC}:8443/").port == 8443
        with pytest.raises(UnsafeCallbackURL, match="port 9000 is refused; callbacks go only to ports 443, 8443"):
            check_callback_url(f"https://{PUBLIC}:9000/")
    with callback_settings(CALLBACK_REQUIRE_HTTPS=True, CALLBACK_ALLOWED_PORTS=None):
        assert check_callback_url(f"https://{PUBLIC}:9000/").port == 9000


@pytest.mark.usefixtures("local")
def test_networks_excepted_for_tests_are_reached_on_any_port(receiver):
    """CALLBACK_ALLOWED_NETWORKS names receivers the operator runs (a test's, on 127.0.0.1): their port is theirs."""
    server = receiver()
    assert check_callback_url(server.url()).port == server.port
    assert deliver(server.url(), b"{}", {}).delivered


def test_delivery_checks_the_port_again_and_never_connects():
    """A job accepted under a looser policy (or a stored URL) is checked again when its callback is sent."""
    with callback_settings(CALLBACK_REQUIRE_HTTPS=False, CALLBACK_ALLOWED_NETWORKS=[], CALLBACK_CONNECT_TIMEOUT=0.5):
        result = deliver(f"http://{PUBLIC}:6379/hook", b"{}", {})
    assert (result.delivered, result.status, result.retryable, result.address) == (False, None, False, None)
    assert result.error.startswith("refused: callback URL port 6379 is refused")


def test_the_allowed_ports_setting_is_checked():
    from django.core.checks import run_checks

    def port_errors(value):
        with callback_settings(CALLBACK_ALLOWED_PORTS=value):
            return [
                e for e in run_checks() if e.id.startswith("agent_handshake.") and "CALLBACK_ALLOWED_PORTS" in e.msg
            ]

    for value in ("auto", None, [443], (443, 8443)):
        assert port_errors(value) == [], value
    for value in ("any", "", 443, [], [0], [65536], ["443"], [True], [443.0], {"https": 443}):
        errors = port_errors(value)
        assert [e.id for e in errors] == ["agent_handshake.E002"], value
    assert "None for any port" in port_errors([])[0].hint
