"""AHP discovery on every response of the site (§3).

- ``Link: </.well-known/agent.json>; rel="ahp-manifest agent-manifest"; type="application/agent+json"``
  and ``Content-Signal`` headers on every response;
- the manifest itself for ``Accept: application/agent+json`` on any URL (§3.2) but the app's protocol endpoints,
  which answer every request in their own protocol;
- the markdown version of a registered object's page for ``<url>.md`` or ``Accept: text/markdown``;
- in HTML, the ``<link rel="agent-manifest">`` tag before ``</head>`` and the hidden in-page notice before
  ``</body>`` (§3.3, §3.4), on error pages too, each followed by a marker comment, and not again on a page
  that already carries its marker (a cached page, the template tags' output: see ``placed_marker``). Streaming
  responses are rewritten chunk by chunk, gzip bodies are decompressed and compressed again, other encodings
  are left alone; ``Content-Length`` and a strong ``ETag`` are kept truthful (a 304 that revalidates a
  rewritten page names the weakened ``ETag`` too).

Place it after ``GZipMiddleware`` in ``MIDDLEWARE`` (so it sees bodies before they are compressed).
"""

from __future__ import annotations

import codecs
import functools
import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NamedTuple
from urllib.parse import quote, unquote, urlsplit

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.signals import setting_changed
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve, reverse
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.crypto import salted_hmac
from django.utils.encoding import iri_to_uri
from django.utils.http import RFC3986_SUBDELIMS, parse_etags
from django.utils.text import compress_string

from . import content_signals, state
from .ahp.manifest import converse_path
from .conf import SETTING_NAME, app_settings
from .cors import answer_preflight, is_preflight
from .frontdoor import FrontDoorView
from .indexing import documents_of
from .models import Document
from .registry import AHP_VERSION, content_registry
from .views import manifest_response, markdown_response

AGENT_JSON = "application/agent+json"
MARKDOWN = "text/markdown"
#: The most a gzip page may inflate to and still be rewritten: a view that passes on an upstream's gzip body (a
#: proxy, a cache) would otherwise have the server inflate whatever it expands to (a few hundred KB of gzip can
#: hold gigabytes). A larger page goes out as it came, still named by the ``Link`` header.
MAX_INFLATED_PAGE_BYTES = 8 * 1024 * 1024
_INFLATE_STEP = 256 * 1024

# A document, not a fragment (htmx's "<li>...</li>"): it has an <html> start tag, or a doctype when it omits that
# optional tag too ("<!DOCTYPE html><title>...", as some style guides advise).
_HTML_OPEN = re.compile(rb"<html[\s>]|<!doctype\s+html", re.IGNORECASE)
# Where to look for "<html": the doctype and a comment or two come first, never kilobytes of content.
_HTML_OPEN_WINDOW = 4096

# The page's own </head> and </body> are the end tags the browser's tokenizer reads as markup (WHATWG HTML §13.2.5):
# not a "</head>" in a comment, in an attribute value, in the text of an element whose content is not markup (a
# script's string, a style sheet, a textarea...), nor in a <template> (whose tree builder drops those end tags).
# HTML lets a page omit "</head>": its head then ends at the body's start tag (§13.2.6.4.4), read the same way.
_RAW_TEXT = (b"script", b"style", b"textarea", b"title", b"noscript", b"iframe", b"noembed", b"noframes", b"xmp")
_NAME = rb"[a-zA-Z][^\s/>]*+"
# A tag's attributes: a quote opens a value only after "=" (and spaces), and the value runs to the same quote; the
# rest (names, unquoted values, spaces) runs to ">" or "=". An "=" is read only with what follows it, so the scan of
# a chunk that ends after one stops before it. Possessive: no backtracking, linear in the page.
_ATTRIBUTES = rb"""(?:[^>=]++|=\s*+(?:"[^"]*+"|'[^']*+'|(?=[^\s"'])))*+"""
# Everything that cannot hide an end tag nor start what does, in one regex call: text, a "<" that opens nothing,
# a whole tag (but a raw-text element's, a template's or the body's start tag, and the end tags of head, body and
# template), and a whole bogus comment (the doctype, "<?xml ...>", "</ x>"). It stops at one of those tags, a
# comment, or where a chunk cuts a tag short.
_SKIP = re.compile(
    rb"(?:[^<]++|<(?=[^!/?a-zA-Z])"
    rb"|<(?!(?i:" + b"|".join(_RAW_TEXT) + rb"|template|body)[\s/>])" + _NAME + _ATTRIBUTES + rb">"
    rb"|</(?!(?i:head|body|template)[\s/>])" + _NAME + _ATTRIBUTES + rb">"
    rb"|<(?:!(?!--)|\?|/(?![a-zA-Z]))[^>]*+>)*+"
)
_EVENT = re.compile(
    rb"<(?:(!--)|((?i:" + b"|".join(_RAW_TEXT) + rb"|template|body))(?=[\s/>])|/((?i:head|body|template))(?=[\s/>]))"
)
_TAG_NAME = re.compile(rb"</?" + _NAME + rb"(?=[\s/>])")
_ATTRIBUTES_TO_END = re.compile(_ATTRIBUTES)
_QUOTE_OPEN = re.compile(rb"""=\s*+(["'])""")
_QUOTE_END = {quote: re.compile(quote) for quote in (b'"', b"'")}
_QUOTE_ENDS = tuple(_QUOTE_END.values())
_COMMENT_END = re.compile(rb"--!?>")
_RAW_TEXT_END = {name: re.compile(rb"</(?i:" + name + rb")(?=[\s/>])") for name in _RAW_TEXT}
#: Bytes a comment's or a raw text's end may span (``</noframes `` and ``--!>`` included).
_LONGEST_END = 16
# What could end a comment, raw text, quoted value or template that began before it (or is another body end).
_CLOSERS = re.compile(rb"""--!?>|["']|</(?i:""" + b"|".join(_RAW_TEXT) + rb"""|template|body)(?=[\s/>])""")
_TAG_NAME_ENDS = (b" ", b"\t", b"\n", b"\r", b"\f", b"/", b">")


class EndTagScanner:
    """Finds a page's end tags as the browser's tokenizer reads them, in a page given whole or a chunk at a time.

    Between chunks it carries where the scan is: in markup, in a tag's attributes (in a quoted value), in a
    comment or in raw text, and how deep in templates. A chunk may cut anything short: ``find`` says from where the
    next call must be given the bytes again.
    """

    def __init__(self) -> None:
        #: What ends the comment, raw text or quoted value the scan is in; None in markup and in a tag.
        self.until: re.Pattern[bytes] | None = None
        self.in_tag = False
        #: After the tag being read: the raw text of the element it starts (script, style...), ended by this.
        self.raw_text_end: re.Pattern[bytes] | None = None
        self.templates = 0

    def last_body_end(self, data: bytes, position: int) -> int:
        """In the last of a page's data, read from ``position`` in markup: where its last "</body>" starts when
        nothing after it could end a comment, raw text, quoted value or template it would be in, nor is another
        "</body>"; -1 otherwise. On a page whose body ends once (the usual "</body></html>") that is the end tag
        ``find`` would reach, found from the page's end instead of after reading the whole body."""
        if self.in_tag or self.until is not None or self.templates:
            return -1
        # (One in the other case after it is another "</body>" to _CLOSERS.)
        end = data.rfind(b"</body", position)
        if end < 0:
            end = data.rfind(b"</BODY", position)
        if end < 0 or data[end + 6 : end + 7] not in _TAG_NAME_ENDS or _CLOSERS.search(data, end + 6):
            return -1
        return end

    def find(self, data: bytes, position: int, names: tuple[bytes, ...]) -> tuple[int, bytes, int]:
        """The first end tag in ``data`` from ``position`` whose (lower-case) name is in ``names``:
        ``(where it starts, its name, where the scan goes on)``; ``(-1, b"", where the next scan starts)`` if none.
        The head's end is its end tag, or the body's start tag when that comes first (a page that omits
        "</head>"): ``b"head"`` either way."""
        while True:
            if self.in_tag:
                end = _ATTRIBUTES_TO_END.match(data, position).end()
                if data[end : end + 1] == b">":
                    self.in_tag, self.until, self.raw_text_end = False, self.raw_text_end, None
                    position = end + 1
                elif quote := _QUOTE_OPEN.match(data, end):
                    self.in_tag, self.until, position = False, _QUOTE_END[quote[1]], quote.end()
                else:
                    return -1, b"", end  # a name or a value cut short: read again with the next chunk
            elif self.until is not None:
                match = self.until.search(data, position)
                if match is None:
                    if self.until in _QUOTE_ENDS:
                        return -1, b"", len(data)
                    return -1, b"", max(position, len(data) - _LONGEST_END)
                # A comment's end goes back to markup, a quote's or raw text's to a tag (the raw text's end tag).
                self.in_tag, self.until, position = self.until is not _COMMENT_END, None, match.end()
            else:
                stop = _SKIP.match(data, position).end()
                event = _EVENT.match(data, stop)
                if event is None:
                    tag = _TAG_NAME.match(data, stop)
                    if tag is None:
                        return -1, b"", stop  # the end of the data, or a tag or comment cut short
                    self.in_tag, position = True, tag.end()
                    continue
                comment, start, end_name = event.groups()
                if comment:
                    # From the "--" of "<!--": "<!-->" and "<!--->" are whole (empty) comments.
                    self.until, position = _COMMENT_END, stop + 2
                    continue
                self.in_tag, position = True, event.end()
                if start:
                    name = start.lower()
                    if name == b"template":
                        self.templates += 1
                    elif name == b"body":
                        if b"head" in names and not self.templates:
                            return stop, b"head", position  # the scan goes on in the tag's attributes
                    else:
                        self.raw_text_end = _RAW_TEXT_END[name]
                else:
                    name = end_name.lower()
                    if name == b"template":
                        self.templates = max(self.templates - 1, 0)
                    elif name in names and not self.templates:
                        end = _ATTRIBUTES_TO_END.match(data, position).end()
                        if data[end : end + 1] == b">":  # the end tag is whole: the scan goes on in markup after it
                            self.in_tag, position = False, end + 1
                        return stop, name, position


def placed_marker(piece: str) -> str:
    """The comment that follows every copy of ``piece`` ("link" or "notice") we write, by tag or injection.

    The middleware adds a piece only when the page does not already carry its marker, so a page is never
    given a second copy, even when the copy is an old one: a page stored by the per-site cache or ``cache_page``,
    a ``{% cache %}`` fragment around ``{% agent_notice %}`` (on a cache hit no tag runs, so only what the
    stored HTML says can tell). The marker is an HMAC of ``SECRET_KEY``: page content cannot produce it, and text
    that quotes it (``&lt;!--``) is not it.
    """
    token = salted_hmac("agent_handshake.middleware.placed_marker", piece, algorithm="sha256").hexdigest()[:32]
    return f"<!--agent-handshake:{piece}:{token}-->"


def agent_notice_exempt(view: Callable[..., Any]) -> Callable[..., Any]:
    """Leave this view's HTML as it is: no ``<link>`` tag and no notice injected (headers are still sent)."""
    if iscoroutinefunction(view):

        async def async_wrapper(*args: Any, **kwargs: Any) -> HttpResponseBase:
            response = await view(*args, **kwargs)
            response.agent_notice_exempt = True
            return response

        wrapper = async_wrapper
    else:

        def wrapper(*args: Any, **kwargs: Any) -> HttpResponseBase:
            response = view(*args, **kwargs)
            response.agent_notice_exempt = True
            return response

    wrapper.__name__ = getattr(view, "__name__", "view")
    wrapper.__doc__ = view.__doc__
    wrapper.__wrapped__ = view  # type: ignore[attr-defined]
    return wrapper


class HtmlInjector:
    """Inserts the link tag before ``</head>`` and the notice before ``</body>``, fed a chunk at a time.

    A page that omits ``</head>`` gets the link tag before its ``<body>`` start tag (where the browser ends the
    head), and one with neither gets none: nothing short of parsing it as the browser does says where its head
    ends, and the ``Link`` header (sent on every response) names the manifest anyway. Right after ``<head>``
    would be sound too, but a stream would have to hold the head back until it knew no ``</head>`` came.

    Either is skipped when the page already carries its marker (``link_marker``, ``notice_marker``: see
    ``placed_marker``), looked for as the page streams by. Enough trailing bytes are held back between chunks
    that a closing tag or a marker split across two chunks is still found.

    The end tags are the first ``</head>`` and ``</body>`` that are markup (``EndTagScanner``), whether the page
    comes whole (``rewrite``) or streams: a "</head>" or "</body>" in a script's string, a comment or an attribute
    value comes before the real one, and a stream cannot wait for the last one without holding the rest back. A
    whole page's body is not read tag by tag when its last "</body>" is followed by nothing that could end what
    would hide it (``last_body_end``): the same end tag on a page whose body ends once; on one that ends twice in
    markup (a pasted document's "</body>"), the notice goes before the last, still in the body.
    """

    #: Bytes kept back between chunks at least: longer than any spelling of ``</head>``/``</body>`` looked for.
    HOLD = 16

    def __init__(
        self, link: bytes | None, notice: bytes | None, link_marker: bytes = b"", notice_marker: bytes = b""
    ) -> None:
        self.link = link
        self.notice = notice
        self.link_marker = link_marker
        self.notice_marker = notice_marker
        self.hold = max(self.HOLD, len(link_marker), len(notice_marker))
        self.saw_html = False
        self.pending = b""
        self.scanner = EndTagScanner()
        #: Where in ``pending`` the scanner goes on.
        self.scan_from = 0

    def _insertions(self, data: bytes, last: bool) -> list[tuple[int, bytes]]:
        """Where to insert what in ``data``; marks each piece done once it is placed (by us or before us)."""
        if self.link is not None and self.link_marker and self.link_marker in data:
            self.link = None
        if self.notice is not None and self.notice_marker and self.notice_marker in data:
            self.notice = None
        insertions = []
        while names := (b"head",) * (self.link is not None) + (b"body",) * (self.notice is not None):
            # A whole page's body need not be read tag by tag when its end is plain (the usual "</body></html>").
            if last and names == (b"body",) and (position := self.scanner.last_body_end(data, self.scan_from)) >= 0:
                insertions.append((position, self.notice))
                self.notice = None
                break
            position, name, self.scan_from = self.scanner.find(data, self.scan_from, names)
            if position < 0:
                break
            if name == b"head":
                insertions.append((position, self.link))
                self.link = None
            else:
                insertions.append((position, self.notice))
                self.notice = None
        if self.notice is not None and not self.saw_html and _HTML_OPEN.search(data, 0, _HTML_OPEN_WINDOW):
            self.saw_html = True
        return insertions

    def feed(self, chunk: bytes, *, last: bool = False) -> bytes:
        """The page's bytes from ``chunk`` on that can be sent now; ``last``: no chunk follows."""
        data = self.pending + chunk if self.pending else chunk
        insertions = self._insertions(data, last)
        if insertions:
            # One copy of the page, however many insertions (this runs on every HTML response).
            view, pieces, previous = memoryview(data), [], 0
            for position, text in insertions:  # in the page's order, as the scan found them
                pieces += [view[previous:position], text]
                previous = position
            pieces.append(view[previous:])
            data = b"".join(pieces)
            # The scan goes on after what was inserted before where it stopped.
            self.scan_from += sum(len(text) for position, text in insertions if position < self.scan_from)
        if self.link is None and self.notice is None:
            self.pending = b""
            return data
        # What the scan has not read yet stays for the next chunk.
        cut = min(max(len(data) - self.hold, 0), self.scan_from)
        self.scan_from -= cut
        self.pending = data[cut:]
        return data[:cut]

    def finish(self) -> bytes:
        data, self.pending = self.pending, b""
        # A document with no </body> (allowed in HTML) still gets the notice; a fragment (see _HTML_OPEN) does not.
        if self.notice is not None and self.saw_html:
            data += self.notice
        return data

    def rewrite(self, content: bytes) -> bytes:
        return self.feed(content, last=True) + self.finish()


class _Fragments(NamedTuple):
    header: str
    link: bytes
    notice: bytes
    link_marker: bytes
    notice_marker: bytes


class AgentDiscoveryMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)
        self._fragments: _Fragments | None = None
        self._exempt: list[re.Pattern[str]] | None = None
        setting_changed.connect(self._settings_changed, weak=True)

    def _settings_changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting in (SETTING_NAME, "ROOT_URLCONF", "TEMPLATES", "SECRET_KEY"):
            self._fragments = None
            self._exempt = None

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        if self.is_exempt(request):
            return self.get_response(request)
        response = self.early_response(request) or self.get_response(request)
        return self.process_response(request, response)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if self.is_exempt(request):
            return await self.get_response(request)
        response = await sync_to_async(self.early_response)(request)
        if response is None:
            response = await self.get_response(request)
        return await sync_to_async(self.process_response)(request, response)

    # Requests

    def is_exempt(self, request: HttpRequest) -> bool:
        if self._exempt is None:
            self._exempt = [re.compile(pattern) for pattern in app_settings.EXEMPT_PATHS]
        return any(pattern.search(request.path_info) for pattern in self._exempt)

    def early_response(self, request: HttpRequest) -> HttpResponseBase | None:
        """The manifest or a markdown version, when the request asks for one; else None."""
        if is_preflight(request):
            return self._markdown_preflight(request)
        if request.method not in ("GET", "HEAD"):
            return None
        path = request.path_info
        suffix = app_settings.MARKDOWN_SUFFIX
        wants_manifest = app_settings.ACCEPT_HEADER_DISCOVERY and self._prefers(request, AGENT_JSON)
        wants_markdown = app_settings.MARKDOWN_VERSIONS and (path.endswith(suffix) or self._prefers(request, MARKDOWN))
        # Resolved only for a request that asks for one of them: most requests never do.
        if not (wants_manifest or wants_markdown) or self.is_endpoint(request):
            return None
        if wants_manifest:
            return manifest_response(request)
        if path.endswith(suffix):
            return self._markdown(request, self._markdown_candidates(path[: -len(suffix)]))
        return self._markdown(request, [path])

    @staticmethod
    def is_endpoint(request: HttpRequest) -> bool:
        """Whether the request is for one of the app's protocol endpoints (a front door: /agent/converse, a job's
        status URL, /mcp, /schema-templates...). They answer every request themselves, in their protocol's JSON with
        rate-limit headers, whatever it accepts: an agent polling a job with ``Accept: application/agent+json``
        wants the job, not the manifest."""
        # Before LocaleMiddleware: the thread holds the last request's language, and i18n_patterns match the prefix of
        # the active one. Resolve in the URL's language, or the default one (prefix_default_language=False).
        language = translation.get_language_from_path(request.path_info) or settings.LANGUAGE_CODE
        try:
            # path_info and the request's own URLconf, as Django resolves it (the site mounted under /sub/ too).
            with translation.override(language, deactivate=False):
                match = resolve(request.path_info, getattr(request, "urlconf", None))
        except Resolver404:
            return False
        view_class = getattr(match.func, "view_class", None)
        return isinstance(view_class, type) and issubclass(view_class, FrontDoorView)

    @staticmethod
    def _prefers(request: HttpRequest, media_type: str) -> bool:
        """Whether the request's Accept header prefers ``media_type`` to HTML, weighing q-values, specificity
        and order as Django's ``request.get_preferred_type`` does (``q=0`` refuses a type)."""
        # A substring test first: most requests never name either type (and request.headers copies all of META).
        if media_type not in request.META.get("HTTP_ACCEPT", ""):
            return False
        try:
            return request.get_preferred_type(["text/html", media_type]) == media_type
        except ValueError:  # a parameter Django's header parser refuses (an RFC 2231 charset it does not know)
            return False

    @staticmethod
    def _markdown_candidates(base: str) -> list[str]:
        # "/blog/post.md" -> "/blog/post" or "/blog/post/"; llms.txt's "/blog/post/index.html.md" -> "/blog/post/"
        if base.endswith("/index.html"):
            return [base[: -len("index.html")]]
        return [base, base + "/"] if not base.endswith("/") else [base]

    def _markdown_preflight(self, request: HttpRequest) -> HttpResponseBase | None:
        """A browser's CORS preflight for ``<url>.md``: the markdown version is sent to any origin (with an ETag for
        the page's ``If-None-Match``), so the headers it asks to send are allowed, as for the documents. None when
        the path has no markdown version (the site's own route answers)."""
        path = request.path_info
        suffix = app_settings.MARKDOWN_SUFFIX
        if not app_settings.MARKDOWN_VERSIONS or not path.endswith(suffix) or self.is_endpoint(request):
            return None
        if self._document(request, self._markdown_candidates(path[: -len(suffix)])) is None:
            return None
        response = HttpResponse()
        del response.headers["Content-Type"]  # no content, so no type
        response.headers["Allow"] = "GET, HEAD, OPTIONS"
        response.headers["Content-Length"] = "0"
        answer_preflight(request, response, origin="*", methods="GET, HEAD")
        return response

    @classmethod
    def _markdown(cls, request: HttpRequest, paths: list[str]) -> HttpResponseBase | None:
        document = cls._document(request, paths)
        return markdown_response(request, document) if document is not None else None

    @staticmethod
    def _document(request: HttpRequest, paths: list[str]) -> Document | None:
        """The registered object's document at one of ``paths`` (and the request's query), else None."""
        if not _storable(request.path_info) or not content_registry.models():
            return None
        query = request.META.get("QUERY_STRING", "")
        # Only registered models' documents: those of a model unregistered since stay until agent_reindex.
        at_path = documents_of(content_registry).select_related("content_type").filter(path__in=_document_paths(paths))
        # Objects whose URLs differ in their query only ("/page/?article=b") share a path: the object at this URL is
        # the one whose query is the request's; one whose URL has no query is its path's whatever the request's is
        # ("?utm_source=feed"). A query no object has is the page's own, never another object's.
        if query and _storable(unquote(query)):
            with_query = Q(url__endswith=f"?{query}") | Q(url__endswith=f"?{unquote(query)}")
            for document in at_path.filter(with_query).order_by("pk"):
                if iri_to_uri(urlsplit(document.url).query) == iri_to_uri(unquote(query)):
                    return document
        return at_path.exclude(url__contains="?").order_by("pk").first()

    # Responses

    def fragments(self) -> _Fragments:
        """The Link header value, the <link> tag and the notice (each followed by its marker) and the markers,
        rendered once per settings."""
        if self._fragments is None:
            manifest_url = reverse("agent_handshake:manifest")
            tag = render_to_string("agent_handshake/link.html", {"manifest_url": manifest_url}).strip()
            notice = render_to_string(app_settings.NOTICE_TEMPLATE, notice_context()).strip()
            link_marker, notice_marker = placed_marker("link"), placed_marker("notice")
            self._fragments = _Fragments(
                header=f'<{manifest_url}>; rel="ahp-manifest agent-manifest"; type="{AGENT_JSON}"',
                link=(tag + link_marker).encode(),
                notice=(notice + notice_marker).encode(),
                link_marker=link_marker.encode(),
                notice_marker=notice_marker.encode(),
            )
        return self._fragments

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        fragments = self.fragments()
        header = fragments.header
        existing = response.headers.get("Link")
        if not existing or "agent-manifest" not in existing:
            response.headers["Link"] = f"{existing}, {header}" if existing else header
        if app_settings.ACCEPT_HEADER_DISCOVERY or app_settings.MARKDOWN_VERSIONS:
            if "Vary" in response.headers:
                patch_vary_headers(response, ["Accept"])
            else:
                response.headers["Vary"] = "Accept"
        if content_signals.HEADER not in response.headers:
            snapshot = state.snapshot()
            label = self._model_label(request, response) if snapshot.model_signals else None
            response.headers[content_signals.HEADER] = snapshot.signal_header(label)
        if response.status_code == 304:
            self._revalidated(request, response)
        elif self._should_inject(response) and (encoded := _in_charset(fragments, _declared_charset(response))):
            injector = HtmlInjector(
                encoded.link if app_settings.INJECT_LINK_TAG else None,
                encoded.notice if app_settings.INJECT_NOTICE else None,
                encoded.link_marker,
                encoded.notice_marker,
            )
            self._inject(response, injector)
        return response

    @staticmethod
    def _model_label(request: HttpRequest, response: HttpResponseBase) -> str | None:
        """The registered model whose object this page shows, for its own content signals."""
        if response.status_code != 200 or not _storable(request.path_info):
            return None

        row = (
            Document.objects.filter(path__in=_document_paths([request.path_info]))
            .values_list("content_type__app_label", "content_type__model")
            .first()
        )
        return f"{row[0]}.{row[1]}" if row else None

    @staticmethod
    def _revalidated(request: HttpRequest, response: HttpResponseBase) -> None:
        """A 304 names the validator its 200 was sent with: a rewritten page's ETag went out weak (see ``_inject``),
        and a 304 (a view's ``@etag``, an inner ConditionalGetMiddleware, both comparing weakly) still carries the
        view's strong one, which no cache holds: it must not freshen a stored ``W/"v1"`` with a 304 that says
        ``"v1"`` (RFC 9111 §4.3.4). The request names what the client holds; a 304 has no body to say more."""
        etag = response.headers.get("ETag")
        if not etag or etag.startswith("W/") or "HTTP_IF_NONE_MATCH" not in request.META:
            return
        held = parse_etags(request.META["HTTP_IF_NONE_MATCH"])
        if f"W/{etag}" in held and etag not in held:
            response.headers["ETag"] = f"W/{etag}"

    @staticmethod
    def _should_inject(response: HttpResponseBase) -> bool:
        if not (app_settings.INJECT_LINK_TAG or app_settings.INJECT_NOTICE):
            return False
        if getattr(response, "agent_notice_exempt", False) or response.status_code in (204, 304):
            return False
        # A byte range (206) is a piece of a page that the client joins to others by Content-Range's offsets.
        if response.status_code == 206 or "Content-Range" in response.headers:
            return False
        # A file to save (FileResponse(as_attachment=True), an "export this page" view) is not a page shown: the
        # saved file is to be the one the view offered, without our markup (RFC 6266: the type is a token).
        disposition = response.headers.get("Content-Disposition")
        if disposition and disposition.split(";", 1)[0].strip().lower() == "attachment":
            return False
        if not response.headers.get("Content-Type", "").lower().startswith("text/html"):
            return False
        return response.headers.get("Content-Encoding", "").lower() in ("", "identity", "gzip")

    @staticmethod
    def _inject(response: HttpResponseBase, injector: HtmlInjector) -> None:
        gzipped = response.headers.get("Content-Encoding", "").lower() == "gzip"
        if response.streaming:
            if gzipped:
                return  # A compressed stream is left as it is; see the module docstring on ordering.
            if response.is_async:
                response.streaming_content = _inject_async(injector, response.streaming_content)
            else:
                response.streaming_content = _inject_sync(injector, response.streaming_content)
            response.headers.pop("Content-Length", None)  # The length is not known until the stream ends.
        else:
            original = response.content
            content = _inflated(original) if gzipped else original
            if content is None:
                return  # Not gzip after all, cut short, or too large inflated: passed on as it is, not made a 500.
            rewritten = injector.rewrite(content)
            if rewritten == content:
                return
            response.content = compress_string(rewritten) if gzipped else rewritten
            if "Content-Length" in response.headers:
                response.headers["Content-Length"] = str(len(response.content))
        etag = response.headers.get("ETag")
        if etag and not etag.startswith("W/"):
            # The body changed after the ETag was computed: it is no longer byte-for-byte (RFC 9110 §8.8.1).
            response.headers["ETag"] = f"W/{etag}"


def _inflated(body: bytes) -> bytes | None:
    """``body``, a gzip stream (of one member or several), inflated; None when it is not gzip, is cut short, or
    inflates past :data:`MAX_INFLATED_PAGE_BYTES` (found a step at a time, holding no more than that)."""
    parts: list[bytes] = []
    size = 0
    rest = body
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=31)  # 16 + MAX_WBITS: a gzip header and trailer
            while True:
                part = inflater.decompress(rest, _INFLATE_STEP)
                size += len(part)
                if size > MAX_INFLATED_PAGE_BYTES:
                    return None
                parts.append(part)
                rest = inflater.unconsumed_tail
                if inflater.eof or not (rest or part):
                    break
            if not inflater.eof:
                return None  # cut short
            rest = inflater.unused_data  # the next member, as gzip.decompress reads them all
    except zlib.error:
        return None
    return b"".join(parts)


def _storable(path: str) -> bool:
    """Whether a path can be looked up among the documents' paths at all: a ``%00`` in the URL decodes to a NUL,
    which no PostgreSQL text value holds (the query would fail). Django has already replaced undecodable bytes,
    so NUL is the one character to rule out."""
    return "\x00" not in path


def _declared_charset(response: HttpResponseBase) -> str:
    """The charset the response's Content-Type names, else "ascii". Without one the browser does not read the page
    in Django's DEFAULT_CHARSET but in what the page's ``<meta charset>`` says, or its guess; written in ASCII, with
    character references for the rest, the fragments read the same in whichever of the (ASCII-compatible)
    charsets it settles on."""
    return response.charset if "charset=" in response.headers.get("Content-Type", "").lower() else "ascii"


@functools.lru_cache(maxsize=16)
def _in_charset(fragments: _Fragments, charset: str) -> _Fragments | None:
    """The fragments (rendered as UTF-8) in the page's charset, characters it lacks as character references;
    None when the page is to be left as it is: a charset Python does not know, or one that does not write ASCII as
    ASCII (UTF-16: the tags looked for would not be found anyway). Cached: a site's pages use a charset or two."""
    try:
        name = codecs.lookup(charset.strip("\"'")).name
        if name == "utf-8":
            return fragments
        if "</head>".encode(name) != b"</head>":
            return None
    except (LookupError, ValueError):  # "rot13", "base64": codecs, but not text encodings
        return None
    return fragments._replace(
        **{
            piece: getattr(fragments, piece).decode().encode(name, "xmlcharrefreplace")
            for piece in ("link", "notice", "link_marker", "notice_marker")
        }
    )


def _document_paths(paths: list[str]) -> list[str]:
    """The paths a document of these request paths may be stored under: as they are (a URL written by hand, an
    IRI) and percent-encoded as ``reverse()`` writes them (``path_info`` "/wiki/café/" is "/wiki/caf%C3%A9/")."""
    return list(dict.fromkeys([*paths, *(quote(path, safe=RFC3986_SUBDELIMS + "/~:@") for path in paths)]))


def _inject_sync(injector: HtmlInjector, chunks: Iterator[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        if out := injector.feed(chunk):
            yield out
    if tail := injector.finish():
        yield tail


async def _inject_async(injector: HtmlInjector, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        if out := injector.feed(chunk):
            yield out
    if tail := injector.finish():
        yield tail


def notice_context() -> dict[str, Any]:
    """What the notice template is rendered with (also used by the ``agent_notice`` template tag)."""
    return {
        "manifest_url": reverse("agent_handshake:manifest"),
        "llms_txt_url": reverse("agent_handshake:llms_txt"),
        "converse_url": converse_path(),
        "ahp_version": AHP_VERSION,
    }
