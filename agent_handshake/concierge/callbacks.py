"""Delivering async-job callbacks to URLs that visiting agents give us, without becoming an SSRF proxy.

AHP §13: a concierge that accepts callback URLs MUST validate them. A URL is refused unless every address its
host resolves to is publicly routable and its port is allowed (``CALLBACK_ALLOWED_PORTS``: by default the standard
port of its scheme), when it is given and again before every delivery. The delivery then connects to a checked
address itself (no second DNS lookup, so a rebinding name cannot swap in an internal address), verifies TLS against
the original host name, never follows redirects and reads a bounded amount of the answer within bounded time.

A job's callback is recorded, retried and recovered by :mod:`.job_callbacks`, which sends it with :func:`deliver`,
signs it with :func:`sign` and waits :func:`backoff` between attempts; :func:`verify` is what a receiving agent runs.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import random
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agent_handshake.conf import app_settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

USER_AGENT = "agent-handshake-callback/1"
SIGNATURE_HEADER = "X-AHP-Signature"
MAX_URL_LENGTH = 2048
#: The answer's status line and headers (its body is CALLBACK_MAX_RESPONSE_BYTES'): http.client alone would take 100
#: header lines of 64 KiB each.
MAX_RESPONSE_HEAD_BYTES = 32768
#: Host name lookups waiting at once, each in a thread of its own (getaddrinfo() takes no timeout): a name server
#: that never answers holds its thread until the system resolver gives up, and no more threads than these.
MAX_PENDING_LOOKUPS = 32
DEFAULT_PORTS = {"https": 443, "http": 80}

# Request framing is ours: values the caller gives for these are ignored.
_OWN_HEADERS = frozenset({"host", "content-type", "content-length", "transfer-encoding", "connection", "user-agent"})
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")
# A last label like these makes URL parsers and inet_aton() read the host as an IPv4 address (0x7f.1, 2130706433).
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)\Z")

_IPV4_PRIVATE = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_IPV4_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT, RFC 6598
# IANA's special-purpose ranges that are not globally reachable though the ipaddress of some Python versions calls
# them global: IETF protocol assignments (192.0.0.192 is Oracle Cloud Classic's metadata service) but for the PCP
# and TURN anycast addresses, and IPv6's second documentation prefix (RFC 9637).
_IPV4_PROTOCOL_ASSIGNMENTS = ipaddress.IPv4Network("192.0.0.0/24")
_IPV4_GLOBAL_ANYCAST = frozenset(map(ipaddress.IPv4Address, ("192.0.0.9", "192.0.0.10")))
_IPV6_DOCUMENTATION = ipaddress.IPv6Network("3fff::/20")
_IPV6_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_IPV6_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
_IPV6_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class UnsafeCallbackURL(ValueError):
    """Raised with a clear, agent-readable message saying why the URL is refused.

    ``temporary`` is true only when the host name could not be resolved for now (the DNS server failed), so a
    delivery may be tried again later.
    """

    def __init__(self, message: str, *, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses that traffic to this IPv6 address ends up at, if it embeds any."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo  # (server, client), the client already de-obfuscated
    if address in _NAT64 or address in _IPV6_COMPATIBLE:
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    return ()


# Judged first, in this order, for both families.
_KIND_FLAGS = (
    ("is_unspecified", "unspecified"),
    ("is_loopback", "loopback"),
    ("is_link_local", "link-local"),
    ("is_multicast", "multicast"),
)


def _kind(address: IPAddress) -> str | None:
    return next((reason for flag, reason in _KIND_FLAGS if getattr(address, flag)), None)


def _unrouted(address: IPAddress) -> str | None:
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "not globally routable"
    return None


def _ipv4_refusal(address: ipaddress.IPv4Address) -> str | None:
    if reason := _kind(address):
        return reason
    if address in _IPV4_SHARED:
        return "shared address space"
    if any(address in network for network in _IPV4_PRIVATE):
        return "private"
    if address in _IPV4_PROTOCOL_ASSIGNMENTS and address not in _IPV4_GLOBAL_ANYCAST:
        return "not globally routable"
    return _unrouted(address)


def address_refusal(address: IPAddress) -> str | None:
    """None if a callback may connect to this address, else the reason ("loopback", "private", ...)."""
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_refusal(address)
    if reason := _kind(address):
        return reason
    if address in _IPV6_UNIQUE_LOCAL:
        return "private"
    if address in _IPV6_SITE_LOCAL:
        return "site-local"
    if address.scope_id:
        return "scoped"
    inner = embedded_ipv4(address)
    if inner:
        # The IPv6 ranges that carry IPv4 are not "global" themselves; what matters is where the packets go.
        return next((reason for reason in map(_ipv4_refusal, inner) if reason), None)
    if address in _IPV6_DOCUMENTATION:
        return "not globally routable"
    return _unrouted(address)


@dataclass(frozen=True)
class CheckedURL:
    url: str
    scheme: str
    host: str  # lower case, IPv6 literals without brackets
    port: int
    path_with_query: str
    addresses: list[str] = field(default_factory=list)  # checked IPs, in resolver order; empty if not resolved

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


def _https_required() -> bool:
    required = app_settings.CALLBACK_REQUIRE_HTTPS
    return not settings.DEBUG if required is None else bool(required)


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    try:
        return [ipaddress.ip_network(cidr, strict=False) for cidr in app_settings.CALLBACK_ALLOWED_NETWORKS]
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"AGENT_HANDSHAKE['CALLBACK_ALLOWED_NETWORKS'] must list CIDR strings: {exc}"
        ) from exc


def _allowed_ports(scheme: str) -> frozenset[int] | None:
    """The ports a callback URL of this scheme may name; None: any."""
    ports = app_settings.CALLBACK_ALLOWED_PORTS
    if ports is None:
        return None
    if ports == "auto":
        return frozenset({DEFAULT_PORTS[scheme]})
    if (
        not isinstance(ports, (list, tuple))
        or not ports
        or not all(isinstance(port, int) and not isinstance(port, bool) for port in ports)
    ):
        raise ImproperlyConfigured(
            f"AGENT_HANDSHAKE['CALLBACK_ALLOWED_PORTS'] must be 'auto', a list of port numbers or None, not {ports!r}"
        )
    return frozenset(ports)


def _check_port(scheme: str, port: int, addresses: list[IPAddress]) -> None:
    """A public address may serve anything on its other ports (mail, databases, consoles): callbacks go only to the
    allowed ones, so agents cannot make the server talk to those."""
    allowed = _allowed_ports(scheme)
    if allowed is None or port in allowed:
        return
    # Every address was accepted; one that is still refused on its own was let in by CALLBACK_ALLOWED_NETWORKS (a
    # receiver the operator runs, such as a test's on 127.0.0.1): such receivers listen on whatever port they have.
    if addresses and all(address_refusal(address) is not None for address in addresses):
        return
    ports = ", ".join(map(str, sorted(allowed)))
    raise UnsafeCallbackURL(
        f"callback URL port {port} is refused; callbacks go only to port{'s' if len(allowed) > 1 else ''} {ports}"
    )


def _check_address(address: IPAddress, networks: list, described: str) -> None:
    reason = address_refusal(address)
    if reason is None or any(address.version == n.version and address in n for n in networks):
        return
    inner = embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else ()
    reaching = f" (it reaches IPv4 {', '.join(map(str, inner))})" if inner else ""
    raise UnsafeCallbackURL(
        f"callback URL refused: host {described} {reason}{reaching}; callbacks go only to publicly routable addresses"
    )


def _check_host_name(host: str) -> None:
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if len(name) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise UnsafeCallbackURL(f"callback URL host {host!r} is not a valid host name")
    if _NUMERIC_LABEL.match(labels[-1]):
        raise UnsafeCallbackURL(
            f"callback URL host {host!r} reads as an IPv4 address in a non-standard form (decimal, octal or hex); "
            "write IPv4 addresses as four decimal numbers, a.b.c.d"
        )


_lookup_slots = threading.BoundedSemaphore(MAX_PENDING_LOOKUPS)


def _getaddrinfo(host: str, port: int, timeout: float) -> list[Any]:
    """socket.getaddrinfo() within ``timeout`` seconds, else TimeoutError. It has no timeout of its own, and the
    system resolver's runs to tens of seconds for a name server that does not answer, one the agent chose."""
    if not _lookup_slots.acquire(blocking=False):
        raise TimeoutError("too many host name lookups are waiting for their name servers")
    outcome: list[Any] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            outcome.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP))
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append(exc)
        finally:
            _lookup_slots.release()
            done.set()

    try:
        threading.Thread(target=lookup, name="callback host lookup", daemon=True).start()
    except BaseException:
        _lookup_slots.release()
        raise
    if not done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout:g} seconds")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _resolve(host: str, port: int) -> list[IPAddress]:
    timeout = float(app_settings.CALLBACK_CONNECT_TIMEOUT)
    try:
        infos = _getaddrinfo(host, port, timeout)
    except (TimeoutError, RuntimeError) as exc:  # RuntimeError: no thread could be started
        raise UnsafeCallbackURL(
            f"callback URL host {host!r} did not resolve within {timeout:g} seconds (its name servers are slow to "
            "answer); try again later",
            temporary=True,
        ) from exc
    except socket.gaierror as exc:
        temporary = exc.errno == socket.EAI_AGAIN
        raise UnsafeCallbackURL(f"callback URL host {host!r} does not resolve", temporary=temporary) from exc
    except (UnicodeError, OSError) as exc:
        raise UnsafeCallbackURL(f"callback URL host {host!r} does not resolve") from exc
    addresses: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = ipaddress.ip_address(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnsafeCallbackURL(f"callback URL host {host!r} does not resolve")
    return addresses


def check_callback_url(url: str, *, resolve: bool = True) -> CheckedURL:
    """Parse and check a callback URL; raise :class:`UnsafeCallbackURL` saying why it is refused.

    With ``resolve`` the host name is resolved and every address it gives must be acceptable; IP literals are
    always checked (no DNS needed). The fragment is dropped.
    """
    if not isinstance(url, str):
        raise UnsafeCallbackURL("callback URL must be a string")
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeCallbackURL(f"callback URL is longer than {MAX_URL_LENGTH} characters")
    if not url.isascii():
        raise UnsafeCallbackURL(
            "callback URL must be ASCII: percent-encode the path and use the xn-- form of an international host name"
        )
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        raise UnsafeCallbackURL("callback URL contains spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise UnsafeCallbackURL(f"callback URL is malformed: {exc}") from exc

    scheme = parts.scheme.lower()
    https_required = _https_required()
    if scheme != "https" and (scheme != "http" or https_required):
        expected = "https" if https_required else "https or http"
        raise UnsafeCallbackURL(f"callback URL scheme must be {expected}, not {scheme or 'missing'!r}")
    if "@" in parts.netloc:
        raise UnsafeCallbackURL("callback URL must not contain credentials (user:password@host)")
    host = parts.hostname
    if not host:
        raise UnsafeCallbackURL("callback URL has no host")
    try:
        port = parts.port
    except ValueError as exc:
        raise UnsafeCallbackURL("callback URL port must be a number from 1 to 65535") from exc
    if port is None:
        port = DEFAULT_PORTS[scheme]
    elif not 1 <= port <= 65535:
        raise UnsafeCallbackURL("callback URL port must be a number from 1 to 65535")
    path_with_query = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    networks = _allowed_networks()
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
        if parts.netloc.startswith("["):
            raise UnsafeCallbackURL(f"callback URL host [{host}] is not a valid IPv6 address") from None
    if literal is not None:
        _check_address(literal, networks, f"{literal} is")
        addresses = [literal]
    else:
        _check_host_name(host)
        addresses = _resolve(host, port) if resolve else []
        for address in addresses:
            _check_address(address, networks, f"{host!r} resolves to {address}, which is")
    _check_port(scheme, port, addresses)
    return CheckedURL(url, scheme, host, port, path_with_query, [str(a) for a in addresses])


@dataclass
class DeliveryResult:
    delivered: bool  # a 2xx came back
    status: int | None  # HTTP status, None if no response
    error: str  # "" on success, else a short reason
    retryable: bool  # network errors, timeouts, 5xx, 408, 425, 429
    address: str | None  # the IP actually connected to
    response_excerpt: bytes  # at most CALLBACK_MAX_RESPONSE_BYTES of the body


class _PeerMismatch(Exception):
    pass


class _ResponseHeadTooLarge(http.client.HTTPException):
    pass


class _ReadDeadline:
    """Bounds the whole response, not each read: a server trickling a byte at a time cannot hold us. While
    ``head_budget`` is set, that many bytes at most are read (the status line and headers), then an error."""

    deadline: float | None = None
    head_budget: int | None = None

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            self.settimeout(remaining)  # type: ignore[attr-defined]
        size = nbytes or memoryview(buffer).nbytes
        if self.head_budget is None:
            return super().recv_into(buffer, size, flags)  # type: ignore[misc]
        if self.head_budget <= 0:
            raise _ResponseHeadTooLarge(f"response headers over {MAX_RESPONSE_HEAD_BYTES} bytes")
        received = super().recv_into(buffer, min(size, self.head_budget), flags)  # type: ignore[misc]
        self.head_budget -= received
        return received


class _DeadlineSocket(_ReadDeadline, socket.socket):
    pass


class _DeadlineSSLSocket(_ReadDeadline, ssl.SSLSocket):
    pass


def _connection_order(addresses: list[str]) -> list[str]:
    """The first address of each family, in resolver order: a host without IPv6 still gets its IPv4 tried."""
    firsts: dict[int, str] = {}
    for address in addresses:
        firsts.setdefault(ipaddress.ip_address(address).version, address)
    return list(firsts.values())


def _open_socket(address: str, port: int, timeout: float) -> socket.socket:
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = _DeadlineSocket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        peer = sock.getpeername()[0]
        if ipaddress.ip_address(peer.split("%")[0]) != ipaddress.ip_address(address.split("%")[0]):
            raise _PeerMismatch(f"connected to {peer}, not the checked address {address}")
    except BaseException:
        sock.close()
        raise
    return sock


def _request_headers(checked: CheckedURL, headers: dict[str, str]) -> dict[str, str]:
    merged = {
        "Host": checked.host_header,
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
        "Connection": "close",
    }
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ValueError(f"invalid header name {name!r}")
        if not isinstance(value, str) or any(char in value for char in "\r\n\0"):
            raise ValueError(f"invalid value for header {name}")
        if name.lower() not in _OWN_HEADERS:
            merged[name] = value
    return merged


def _read_capped(response: http.client.HTTPResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    try:
        while remaining > 0:
            chunk = response.read1(remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except (OSError, http.client.HTTPException):
        pass  # the status is what counts; keep what arrived
    return b"".join(chunks)


def _quoted(text: str) -> str:
    """The receiver's text with its control characters escaped (``\\x00``): it ends up in a database column (which
    refuses NUL), the admin and logs."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def _outcome(status: int, response: http.client.HTTPResponse) -> tuple[bool, str, bool]:
    """(delivered, error, retryable) for a status."""
    if 200 <= status < 300:
        return True, "", False
    if 300 <= status < 400:
        location = _quoted(response.getheader("Location", ""))
        return False, f"redirect {status} not followed" + (f" (Location: {location[:200]})" if location else ""), False
    return False, f"HTTP {status}", status >= 500 or status in (408, 425, 429)


def deliver(url: str, body: bytes, headers: dict[str, str]) -> DeliveryResult:
    """POST ``body`` (application/json) to a callback URL; never raises for network problems.

    The URL is checked and resolved once; the connection goes to a checked address (the first of each address
    family, in resolver order) with TLS verified against the URL's host. ``headers`` are added to the request,
    except Host, Content-Type, Content-Length, Transfer-Encoding, Connection and User-Agent, which are ours.
    """
    try:
        checked = check_callback_url(url, resolve=True)
    except UnsafeCallbackURL as exc:
        return DeliveryResult(False, None, f"refused: {exc}", exc.temporary, None, b"")
    try:
        request_headers = _request_headers(checked, headers)
    except ValueError as exc:
        return DeliveryResult(False, None, str(exc), False, None, b"")

    connect_timeout = float(app_settings.CALLBACK_CONNECT_TIMEOUT)
    read_timeout = float(app_settings.CALLBACK_READ_TIMEOUT)
    address: str | None = None
    sock: socket.socket | None = None
    connection: http.client.HTTPConnection | None = None
    phase = "connecting"
    try:
        error: OSError | None = None
        for candidate in _connection_order(checked.addresses):
            try:
                sock = _open_socket(candidate, checked.port, connect_timeout)
            except OSError as exc:
                error = exc
                continue
            address = candidate
            break
        if sock is None:
            raise error or OSError("no address to connect to")
        if checked.scheme == "https":
            phase = "in the TLS handshake"
            context = ssl.create_default_context()
            context.sslsocket_class = _DeadlineSSLSocket
            sock = context.wrap_socket(sock, server_hostname=checked.host.rstrip("."))
        phase = "sending the request"
        sock.settimeout(read_timeout)
        sock.deadline = time.monotonic() + read_timeout  # type: ignore[attr-defined]
        sock.head_budget = MAX_RESPONSE_HEAD_BYTES  # type: ignore[attr-defined]
        connection = http.client.HTTPConnection(address, checked.port)
        connection.sock = sock
        connection.request("POST", checked.path_with_query, body=body, headers=request_headers)
        phase = "waiting for the response"
        response = connection.getresponse()
        sock.head_budget = None  # type: ignore[attr-defined]  # the body is capped as it is read
        excerpt = _read_capped(response, int(app_settings.CALLBACK_MAX_RESPONSE_BYTES))
        delivered, error_text, retryable = _outcome(response.status, response)
        return DeliveryResult(delivered, response.status, error_text, retryable, address, excerpt)
    except _ResponseHeadTooLarge as exc:
        return DeliveryResult(False, None, f"failed waiting for the response: {exc}", True, address, b"")
    except _PeerMismatch as exc:
        return DeliveryResult(False, None, f"refused: {exc}", False, address, b"")
    except TimeoutError:
        return DeliveryResult(False, None, f"timeout {phase}", True, address, b"")
    except ssl.SSLCertVerificationError as exc:
        return DeliveryResult(False, None, f"TLS certificate refused: {exc.verify_message}", True, address, b"")
    except (OSError, http.client.HTTPException) as exc:
        return DeliveryResult(False, None, f"failed {phase}: {exc!r}", True, address, b"")
    finally:
        if connection is not None:
            connection.close()
        elif sock is not None:
            sock.close()


def backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (from 1) before the next: exponential backoff with
    jitter, half the doubled delay fixed, half random ("equal jitter"), capped by ``CALLBACK_BACKOFF_MAX_SECONDS``.

    The one retry schedule of async work: a callback that did not reach its receiver, and a job whose capability
    crashed (:mod:`.jobs`), are tried again after it."""
    delay = min(app_settings.CALLBACK_BACKOFF_MAX_SECONDS, app_settings.CALLBACK_BACKOFF_SECONDS * 2 ** (attempt - 1))
    return delay / 2 + random.uniform(0, delay / 2)


def sign(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The header that lets the agent check the body came from us: ``t=<unix seconds>,v1=<hex HMAC-SHA256>``.

    The MAC covers ``b"<t>." + body`` with the UTF-8 secret as key.
    """
    t = int(time.time()) if timestamp is None else int(timestamp)
    return {SIGNATURE_HEADER: f"t={t},v1={_mac(secret, t, body)}"}


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature_header: str, *, tolerance: int = 300, now: int | None = None) -> bool:
    """What an agent runs on receipt: the MAC matches (constant time) and the timestamp is within ``tolerance``.

    Several ``v1=`` values are accepted (any may match), so the secret can be rotated.
    """
    if not isinstance(signature_header, str):
        return False
    timestamp: int | None = None
    signatures: list[str] = []
    for item in signature_header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t" and value.isdigit() and value.isascii():
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        return False
    current = int(time.time()) if now is None else now
    if abs(current - timestamp) > tolerance:
        return False
    expected = _mac(secret, timestamp, body).encode()
    # Compare every candidate so the time taken does not depend on which one matched.
    matches = [hmac.compare_digest(expected, candidate.encode("ascii", "replace")) for candidate in signatures]
    return any(matches)
