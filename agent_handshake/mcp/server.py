"""The MCP methods we answer, in a table: lifecycle (``initialize``, ``server/discover``, ``ping``), tools and
resources. Each takes the request's params and the :class:`~.tools.Exchange` and returns the ``result`` object;
on ``2026-07-28`` every result also says ``resultType`` and carries our ``serverInfo`` in its ``_meta``, and the
cacheable ones say how long they keep (``ttlMs``, ``cacheScope``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from .. import state
from ..concierge.validation import named
from ..conf import app_settings
from ..identity.site_key import site_did, site_public_key
from ..registry import AHP_VERSION
from . import resources, tools
from .jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, Message, RpcError
from .tools import Exchange
from .versions import SERVER_INFO_META, VERSIONS

logger = logging.getLogger(__name__)

#: Results a 2026-07-28 client may cache (SEP-2549): they say for how long, and that anyone may share them (they
#: are the same for every caller; the documents are public), as long as agent.json and llms.txt are cached.
CACHEABLE = ("server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read")
CAPABILITIES = {"tools": {"listChanged": False}, "resources": {"listChanged": False}}


def server_info() -> dict[str, Any]:
    """``serverInfo`` as Appendix D.6 extends it: the site's name, the AHP version, the manifest's path; and the
    site's DID and public key (README "Verified agents"), when its key loads."""
    name = state.snapshot().name or "agent_handshake"
    info = {"name": name, "version": AHP_VERSION, "ahp": AHP_VERSION, "manifest": reverse("agent_handshake:manifest")}
    try:
        info["did"], info["public_key"] = site_did(), site_public_key()
    except ImproperlyConfigured:
        logger.exception("The site key cannot be loaded: serverInfo carries no DID")
    return info


def instructions() -> str:
    snapshot = state.snapshot()
    about = f"{snapshot.name}: {snapshot.description}".strip(": ") if snapshot.name else snapshot.description
    return (
        f"{about} ".lstrip()
        + "Ask questions with the ask tool (or a capability's own tool); each answer cites its sources. "
        "The site's pages are resources, as markdown. Tools that change something need the site's API key. "
        f"The AHP manifest at {reverse('agent_handshake:manifest')} describes every capability."
    )


def initialize(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    return {
        "protocolVersion": exchange.revision.version,
        "capabilities": CAPABILITIES,
        "serverInfo": server_info(),
        "instructions": instructions(),
    }


def discover(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    return {
        "supportedVersions": list(VERSIONS),
        "capabilities": CAPABILITIES,
        "serverInfo": server_info(),
        "instructions": instructions(),
    }


def unpaged(params: dict[str, Any]) -> None:
    """A list we serve in one page gives no cursor, so any cursor sent is not ours: -32602, as pagination says
    invalid cursors should be (resources/list checks its own)."""
    if params.get("cursor") is not None:
        raise RpcError(INVALID_PARAMS, "params.cursor is not a cursor this server gave (this list has one page).")


def tools_list(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    unpaged(params)
    return {"tools": tools.definitions(exchange.revision)}


def resource_templates(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    unpaged(params)
    return {"resourceTemplates": []}


METHODS: dict[str, Callable[[dict[str, Any], Exchange], dict[str, Any]]] = {
    "initialize": initialize,
    "server/discover": discover,
    "ping": lambda params, exchange: {},
    "tools/list": tools_list,
    "tools/call": tools.call,
    "resources/list": resources.listing,
    "resources/read": resources.read,
    "resources/templates/list": resource_templates,
}


#: The methods that ask the site to do work for the caller (answer a question, run a capability, read a page): accepted,
#: one earns a verified agent trust, as a converse on AHP does. The rest (the lifecycle, ``ping``, the listings) is
#: housekeeping the site answers alike for everyone: accepted it moves no trust, or ten pings would take a new DID to
#: the top tier; refused it lowers trust, as any refusal does.
WORK = ("tools/call", "resources/read")


def earns_trust(message: Message) -> bool:
    """Whether ``message`` (a request), accepted, earns a verified agent trust (:data:`WORK`). The ``job_status`` tool
    is a poll: it reads how a job stands, and the call that started the job earned what it did."""
    if message.method not in WORK:
        return False
    name = message.params.get("name") if message.method == "tools/call" else None
    return not (name == tools.JOB_STATUS and all(capability.name != name for capability in tools.offered()))


def dispatch(message: Message, exchange: Exchange) -> dict[str, Any]:
    method = METHODS.get(message.method)
    if method is None:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {named(message.method)}")
    value = method(message.params, exchange)
    if exchange.revision.modern:
        value = {
            **value,
            "resultType": "complete",
            "_meta": {**value.get("_meta", {}), SERVER_INFO_META: server_info()},
        }
        if message.method in CACHEABLE:
            value.update(ttlMs=app_settings.HTTP_MAX_AGE * 1000, cacheScope="public")
    return value
