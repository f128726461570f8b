"""MCP's protocol revisions and how a request names the one it speaks.

Two eras:

- the handshake revisions (``2024-11-05`` ... ``2025-11-25``): ``initialize`` negotiates a version (the client's,
  when we speak it, else our newest), and later requests may repeat it in the ``MCP-Protocol-Version`` header. We
  are stateless: no ``Mcp-Session-Id`` is issued or needed; a request without the header is read as
  ``2025-03-26``, as the 2025-06-18 transport says;
- ``2026-07-28``: no handshake; every request carries its version, the client's capabilities and (optionally) its
  info in ``params._meta``, mirrored in the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers,
  which must be sent and agree with the body. ``server/discover`` says what we speak.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..concierge.validation import named, shown
from ..registry import MCP_VERSIONS
from .jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, Message, RpcError

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = tuple(version for version in MCP_VERSIONS if version not in MODERN_VERSIONS)
VERSIONS = MCP_VERSIONS
#: What a handshake-era request without ``MCP-Protocol-Version`` speaks (the 2025-06-18 transport's rule).
ASSUMED_WITHOUT_HEADER = "2025-03-26"
#: The revisions that take a JSON-RPC batch: JSON-RPC 2.0 has them, 2025-03-26 says servers MUST receive them, and
#: 2025-06-18 removed them (its transport: the body "MUST be a single JSON-RPC request, notification, or response").
BATCHING_VERSIONS = ("2024-11-05", "2025-03-26")

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
#: The body parameter each name-bearing method's ``Mcp-Name`` header mirrors (2026-07-28).
NAMED_PARAMS = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
#: A header value a client could not send as it is (non-ASCII, edge whitespace) travels as ``=?base64?<b64>?=``.
WRAPPED = re.compile(r"=\?base64\?(?P<payload>[A-Za-z0-9+/=]*)\?=")


def header_value(sent: str) -> str | None:
    """A mirrored header's value, unwrapped when base64-wrapped; None for a wrapping that is not canonical base64
    of UTF-8 (so it matches nothing)."""
    wrapped = WRAPPED.fullmatch(sent)
    if wrapped is None:
        return sent
    payload = wrapped["payload"]
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:
            return None
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Revision:
    version: str

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS

    def at_least(self, version: str) -> bool:
        return VERSIONS.index(self.version) >= VERSIONS.index(version)


def negotiate(requested: str) -> str:
    """The version ``initialize`` answers: the client's, if we speak it, else our newest handshake revision."""
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def unsupported(requested: Any) -> RpcError:
    # What was asked, cut: a header's value has no body cap to bound it.
    asked = named(requested) if isinstance(requested, str) else shown(requested)
    return RpcError(
        UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {"supported": list(VERSIONS), "requested": asked}
    )


def batch_version(headers: Mapping[str, str]) -> str:
    """The revision a batch speaks. We keep no session, so the revision a client negotiated reaches us only in the
    ``MCP-Protocol-Version`` header (which 2025-06-18 on MUST send); without it a batch speaks ``2025-03-26``, as a
    single message does. A 2026-07-28 message names its revision in ``_meta`` too, but must send the header as well."""
    return headers.get("MCP-Protocol-Version", ASSUMED_WITHOUT_HEADER)


def revision_of(message: Message, headers: Mapping[str, str]) -> Revision:
    """The revision ``message`` speaks, or :class:`RpcError` for an envelope or headers that disagree."""
    meta = message.meta
    header = headers.get("MCP-Protocol-Version")
    if PROTOCOL_VERSION_META in meta or message.method == "server/discover":
        version = meta.get(PROTOCOL_VERSION_META)
        missing = [key for key in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if key not in meta]
        if missing:
            raise RpcError(INVALID_PARAMS, f"params._meta lacks {', '.join(missing)}.")
        mirrored = {"MCP-Protocol-Version": version, "Mcp-Method": message.method}
        if message.method in NAMED_PARAMS:
            mirrored["Mcp-Name"] = message.params.get(NAMED_PARAMS[message.method])
        for name, expected in mirrored.items():
            sent = headers.get(name)
            if sent is None and expected is not None:  # a gateway may route on it: left out is refused, as a lie is
                raise RpcError(HEADER_MISMATCH, f"The {name} header is missing; it must be {shown(expected)}.")
            if sent is not None and header_value(sent) != expected:
                message = f"The {name} header ({shown(sent)}) does not match the body ({shown(expected)})."
                raise RpcError(HEADER_MISMATCH, message)
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, f"params._meta[{PROTOCOL_VERSION_META!r}] must be a string.")
        if version not in VERSIONS:
            raise unsupported(version)
        return Revision(version)
    if header in MODERN_VERSIONS:  # that revision's requests say it in the body too
        raise RpcError(INVALID_PARAMS, f"params._meta lacks {PROTOCOL_VERSION_META}, {CLIENT_CAPABILITIES_META}.")
    if header is not None and header not in VERSIONS:  # initialize too: the transport's MUST names every request
        raise unsupported(header)
    if message.method == "initialize":
        requested = message.params.get("protocolVersion")
        if not isinstance(requested, str):  # every revision's schema requires it, as a string
            raise RpcError(INVALID_PARAMS, "params.protocolVersion (the revision the client speaks) must be a string.")
        return Revision(negotiate(requested))
    return Revision(header or ASSUMED_WITHOUT_HEADER)
