"""The site's own documents as MCP resources: ``llms.txt``, ``llms-full.txt`` and one per registered object.

A resource's URI is the document's public URL on this site (what llms.txt links to); its text is the markdown
the site serves for it. ``resources/read`` answers only those URIs, from the database: it never fetches anything,
so an agent cannot make the site request a URL of its choosing (the upstream reference implementation fetches
any URI it is given). ``resources/list`` pages through the documents in primary-key order with an opaque cursor.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.urls import reverse
from django.utils.encoding import iri_to_uri
from django.utils.http import RFC3986_SUBDELIMS

from .. import state
from ..concierge import documents
from ..concierge.validation import cut
from ..conf import app_settings
from .jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from .tools import Exchange

MARKDOWN = "text/markdown"
PAGE_SIZE = 100
#: The most of a URI that was not found that the error quotes back.
URI_SHOWN = 256


def _cursor(after: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


def _after(cursor: Any) -> int:
    if cursor is None:
        return 0
    try:
        after = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["after"]
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError, RecursionError):
        after = None
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise RpcError(INVALID_PARAMS, "params.cursor is not a cursor this server gave.")
    return after


def _fixed(base: str) -> list[dict[str, Any]]:
    return [
        {
            "uri": base + reverse("agent_handshake:llms_txt"),
            "name": "llms.txt",
            "description": "The site's index for language models: its sections and pages, with a line each.",
            "mimeType": MARKDOWN,
        },
        {
            "uri": base + reverse("agent_handshake:llms_full_txt"),
            "name": "llms-full.txt",
            "description": "Every page's full text in one markdown document.",
            "mimeType": MARKDOWN,
        },
    ]


def listing(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """``resources/list``."""
    after = _after(params.get("cursor"))
    resources = _fixed(exchange.base) if after == 0 else []
    rows = documents.listed_after(after, PAGE_SIZE + 1)
    for _, url, title, summary in rows[:PAGE_SIZE]:
        # A URI, as MCP's Resource.uri is: an object URL written as an IRI ("/articles/日本茶/") is percent-encoded.
        uri = iri_to_uri(documents.absolute_url(exchange.base, url))
        resource = {"uri": uri, "name": title or url, "mimeType": MARKDOWN}
        if exchange.revision.at_least("2025-06-18") and title:
            resource["title"] = title
        if summary:
            resource["description"] = summary[:500]
        resources.append(resource)
    page: dict[str, Any] = {"resources": resources}
    if len(rows) > PAGE_SIZE:
        page["nextCursor"] = _cursor(rows[PAGE_SIZE - 1][0])
    return page


def read(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """``resources/read``: one of :func:`listing`'s URIs, rendered from the database."""
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RpcError(INVALID_PARAMS, "params.uri must be a resource URI from resources/list.")
    found = _text(uri, exchange.base, app_settings.MCP_MAX_RESOURCE_CHARS - exchange.resource_chars)
    if found is None:
        # 2026-07-28 gave "resource not found" the code of invalid params; earlier revisions have their own.
        code = INVALID_PARAMS if exchange.revision.modern else RESOURCE_NOT_FOUND
        raise RpcError(code, "Resource not found", {"uri": cut(uri, URI_SHOWN)})
    text, label = found
    # One budget for the whole HTTP request: a batch of reads is held in memory at once, as one response.
    exchange.resource_chars += len(text)
    if exchange.resource_chars > app_settings.MCP_MAX_RESOURCE_CHARS:
        raise RpcError(
            INVALID_PARAMS,
            f"This request has read over {app_settings.MCP_MAX_RESOURCE_CHARS} characters of resources; read "
            f"{cut(uri, URI_SHOWN)} in a request of its own.",
        )
    # The document's content signals, as its markdown version's Content-Signal header gives them (the view sends
    # that header too): an MCP client sees no HTTP header, and the site-wide one would say ai-input=yes for a
    # model that says no.
    exchange.signal_labels.append(label)
    signals = {"content_signals": state.snapshot().signals_for(label)}
    return {"contents": [{"uri": uri, "mimeType": MARKDOWN, "text": text, "_meta": signals}]}


def _text(uri: str, base: str, budget: int) -> tuple[str, str | None] | None:
    """The resource's markdown and the label of the model whose signals it has (None: the site's); ``llms-full.txt``
    is refused beyond ``budget`` characters as it is built."""
    try:
        parts, site = urlsplit(uri), urlsplit(base)
    except ValueError:  # not a URL (an unclosed IPv6 bracket): not one of ours
        return None
    if parts.scheme not in ("http", "https"):
        return None
    ours = parts.netloc.lower() == site.netloc.lower()
    path = parts.path
    if ours and path == reverse("agent_handshake:llms_txt"):
        return documents.llms_txt(base), None
    if ours and path == reverse("agent_handshake:llms_full_txt"):
        return _llms_full(base, budget), None
    # The path as sent, as the listing percent-encoded it, or as the IRI the object's URL may be stored as (a
    # decoded %00 is no stored path's: PostgreSQL refuses NUL in a query).
    decoded = unquote(path)
    paths = {path} if "\x00" in decoded else {path, decoded, quote(decoded, safe=RFC3986_SUBDELIMS + "/~:@")}
    # get_url may give an absolute URL on another host, which the listing gives as it is: such a document is read by
    # that whole URL, from the database like any other (never fetched).
    urls = None if ours else {uri, *(f"{parts.scheme}://{parts.netloc}{each}" for each in paths)}
    document = documents.at_url(paths, urls)
    if document is None:
        return None
    return documents.markdown(document, base), documents.model_label(document)


def _llms_full(base: str, budget: int) -> str:
    pieces, size = [], 0
    for piece in documents.llms_full_txt(base):
        size += len(piece)
        if size > budget:
            raise RpcError(
                INVALID_PARAMS,
                f"llms-full.txt is over the {budget} characters this request may still read (MCP_MAX_RESOURCE_CHARS "
                f"is {app_settings.MCP_MAX_RESOURCE_CHARS} a request); read the documents one by one, or GET "
                f"{base + reverse('agent_handshake:llms_full_txt')} over HTTP.",
            )
        pieces.append(piece)
    return "".join(pieces)
