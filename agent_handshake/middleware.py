"""AHP discovery on every response of the site (§3).

- ``Link: </.well-known/agent.json>; rel="ahp-manifest agent-manifest"; type="application/agent+json"``
  and ``Content-Signal`` headers on every response;
- the manifest itself for ``Accept: application/agent+json`` on any URL (§3.2);
- the markdown version of a registered object's page for ``<url>.md`` or ``Accept: text/markdown``;
- in HTML, the ``<link rel="agent-manifest">`` tag before ``</head>`` and the hidden in-page notice before
  ``</body>`` (§3.3, §3.4), on error pages too, each followed by a marker comment, and not again on a page
  that already carries its marker (a cached page, the template tags' output: see ``placed_marker``). Streaming
  responses are rewritten chunk by chunk, gzip bodies are decompressed and compressed again, other encodings
  are left alone; ``Content-Length`` and a strong ``ETag`` are kept truthful.

Place it after ``GZipMiddleware`` in ``MIDDLEWARE`` (so it sees bodies before they are compressed).
"""

from __future__ import annotations

import codecs
import gzip
import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NamedTuple
from urllib.parse import quote

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponseBase
from django.template.loader import render_to_string
from django.urls import get_script_prefix, reverse
from django.utils.cache import patch_vary_headers
from django.utils.crypto import salted_hmac
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.text import compress_string

from . import content_signals, state
from .conf import SETTING_NAME, app_settings

AGENT_JSON = "application/agent+json"
MARKDOWN = "text/markdown"

_HEAD_CLOSE = re.compile(rb"</head\s*>", re.IGNORECASE)
_BODY_CLOSE = re.compile(rb"</body\s*>", re.IGNORECASE)
_HTML_OPEN = re.compile(rb"<html[\s>]", re.IGNORECASE)
# In a stream, "</body>" is the end tag only where the parser reads markup: not in a comment, nor in the text of
# an element whose content it does not parse (script and style, textarea and title, the older raw-text ones).
_TEXT_ELEMENTS = (b"script", b"style", b"textarea", b"title", b"noscript", b"iframe", b"noembed", b"noframes", b"xmp")
_MARKUP = re.compile(rb"<(?:(!--)|(" + b"|".join(_TEXT_ELEMENTS) + rb")[\s/>]|/body\s*>)", re.IGNORECASE)
_COMMENT_END = re.compile(rb"--!?>")
_TEXT_END = {name: re.compile(rb"</" + name + rb"[\s/>]", re.IGNORECASE) for name in _TEXT_ELEMENTS}
# Where to look for "<html": the doctype and a comment or two come first, never kilobytes of content.
_HTML_OPEN_WINDOW = 4096


def _find_tag(data: bytes, literal: bytes, pattern: re.Pattern[bytes], *, last: bool = False) -> int:
    """Position of a closing tag: a plain byte search first (fast on 100 KB pages), the regex only if the
    page spells it oddly (``</BODY >``, ``</Body>``)."""
    for spelling in (literal, literal.upper()):
        position = data.rfind(spelling) if last else data.find(spelling)
        if position >= 0:
            return position
    positions = [match.start() for match in pattern.finditer(data)]
    if not positions:
        return -1
    return positions[-1] if last else positions[0]


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

    Either is skipped when the page already carries its marker (``link_marker``, ``notice_marker``: see
    ``placed_marker``), looked for as the page streams by. Enough trailing bytes are held back between chunks
    that a closing tag or a marker split across two chunks is still found.

    A whole page (``rewrite``) gets the notice before its last ``</body>``: a "</body>" in a script's string or a
    comment comes before the real one. A stream cannot wait for the last one without holding the rest of the
    page back, so it gets the notice before the first ``</body>`` that is markup, and whether the scan is inside
    a comment or a script (style, textarea...) is carried from chunk to chunk.
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
        # A stream's scan: where in ``pending`` it goes on, and what ends the comment or element it is in (if any).
        self.scan_from = 0
        self.text_end: re.Pattern[bytes] | None = None

    def _stream_body_end(self, data: bytes) -> int:
        """Where the first ``</body>`` in ``data`` that is markup starts (-1: none), scanning on from ``scan_from``;
        ``scan_from`` is left where the next chunk's scan starts."""
        position = self.scan_from
        while True:
            if self.text_end is None:
                match = _MARKUP.search(data, position)
                if match is None:
                    break
                if match[1]:
                    # From the "--" of "<!--": "<!-->" and "<!--->" are whole (empty) comments.
                    self.text_end, position = _COMMENT_END, match.start() + 2
                elif match[2]:
                    self.text_end, position = _TEXT_END[match[2].lower()], match.end()
                else:
                    return match.start()
            else:
                match = self.text_end.search(data, position)
                if match is None:
                    break
                self.text_end, position = None, match.end()
        # The data may end in a tag cut short (none is longer than ``hold``): the next chunk completes it.
        self.scan_from = max(position, len(data) - self.hold)
        return -1

    def _insertions(self, data: bytes, whole: bool) -> list[tuple[int, bytes]]:
        """Where to insert what in ``data``; marks each piece done once it is placed (by us or before us)."""
        insertions = []
        if self.link is not None:
            if self.link_marker and self.link_marker in data:
                self.link = None
            else:
                head_end = _find_tag(data, b"</head>", _HEAD_CLOSE)
                if head_end >= 0:
                    insertions.append((head_end, self.link))
                    self.link = None
        if self.notice is not None:
            if self.notice_marker and self.notice_marker in data:
                self.notice = None
            else:
                body_end = _find_tag(data, b"</body>", _BODY_CLOSE, last=True) if whole else self._stream_body_end(data)
                if body_end >= 0:
                    insertions.append((body_end, self.notice))
                    self.notice = None
                elif not self.saw_html and _HTML_OPEN.search(data, 0, _HTML_OPEN_WINDOW):
                    self.saw_html = True
        return insertions

    def feed(self, chunk: bytes, *, whole: bool = False) -> bytes:
        data = self.pending + chunk if self.pending else chunk
        insertions = self._insertions(data, whole)
        if insertions:
            # One copy of the page, however many insertions (this runs on every HTML response).
            view, pieces, previous = memoryview(data), [], 0
            for position, text in sorted(insertions, key=lambda item: item[0]):
                pieces += [view[previous:position], text]
                previous = position
            pieces.append(view[previous:])
            data = b"".join(pieces)
            # A stream's scan goes on after what was inserted before where it stopped.
            self.scan_from += sum(len(text) for position, text in insertions if position < self.scan_from)
        if self.link is None and self.notice is None:
            self.pending = b""
            return data
        cut = max(len(data) - self.hold, 0)
        if self.notice is not None and not whole:
            cut = min(cut, self.scan_from)  # what the scan has not read yet stays for the next chunk
            self.scan_from -= cut
        self.pending = data[cut:]
        return data[:cut]

    def finish(self) -> bytes:
        data, self.pending = self.pending, b""
        # A document with no </body> (allowed in HTML) still gets the notice; a fragment (no <html>) does not.
        if self.notice is not None and self.saw_html:
            data += self.notice
        return data

    def rewrite(self, content: bytes) -> bytes:
        return self.feed(content, whole=True) + self.finish()


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
        self._endpoints: tuple[str, str] | None = None
        setting_changed.connect(self._settings_changed, weak=True)

    def _settings_changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting in (SETTING_NAME, "ROOT_URLCONF", "TEMPLATES", "SECRET_KEY"):
            self._fragments = None
            self._exempt = None
            self._endpoints = None

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
        if request.method not in ("GET", "HEAD") or self.is_endpoint(request.path_info):
            return None
        if app_settings.ACCEPT_HEADER_DISCOVERY and self._prefers(request, AGENT_JSON):
            from .views import manifest_response

            return manifest_response(request)
        if app_settings.MARKDOWN_VERSIONS:
            suffix = app_settings.MARKDOWN_SUFFIX
            path = request.path_info
            if path.endswith(suffix):
                return self._markdown(request, self._markdown_candidates(path[: -len(suffix)]))
            if self._prefers(request, MARKDOWN):
                return self._markdown(request, [path])
        return None

    def is_endpoint(self, path: str) -> bool:
        """Whether ``path`` (a ``request.path_info``) is /agent/converse or a job's status URL: they answer every
        request themselves (in AHP JSON, with rate-limit headers), whatever it accepts; an agent polling a job with
        ``Accept: application/agent+json`` wants the job, not the manifest."""
        if self._endpoints is None:
            # reverse() includes the script prefix (the site mounted under /sub/), path_info does not.
            prefix_length = len(get_script_prefix()) - 1
            status = reverse("agent_handshake:converse_status", args=["-"])[prefix_length:]
            self._endpoints = (reverse("agent_handshake:converse")[prefix_length:], status[: -len("-")])
        converse, status_prefix = self._endpoints
        return path == converse or path.startswith(status_prefix)

    @staticmethod
    def _prefers(request: HttpRequest, media_type: str) -> bool:
        """Whether the request's Accept header prefers ``media_type`` to HTML, weighing q-values, specificity
        and order as Django's ``request.get_preferred_type`` does (``q=0`` refuses a type)."""
        # A substring test first: most requests never name either type (and request.headers copies all of META).
        if media_type not in request.META.get("HTTP_ACCEPT", ""):
            return False
        return request.get_preferred_type(["text/html", media_type]) == media_type

    @staticmethod
    def _markdown_candidates(base: str) -> list[str]:
        # "/blog/post.md" -> "/blog/post" or "/blog/post/"; llms.txt's "/blog/post/index.html.md" -> "/blog/post/"
        if base.endswith("/index.html"):
            return [base[: -len("index.html")]]
        return [base, base + "/"] if not base.endswith("/") else [base]

    @staticmethod
    def _markdown(request: HttpRequest, paths: list[str]) -> HttpResponseBase | None:
        from .indexing import documents_of
        from .registry import content_registry
        from .views import markdown_response

        if not _storable(request.path_info) or not content_registry.models():
            return None
        # Only registered models' documents: those of a model unregistered since stay until agent_reindex.
        document = (
            documents_of(content_registry)
            .select_related("content_type")
            .filter(path__in=_document_paths(paths))
            .order_by("pk")
            .first()
        )
        return markdown_response(request, document) if document is not None else None

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
        if self._should_inject(response) and (encoded := _in_charset(fragments, response.charset)):
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
        from .models import Document

        row = (
            Document.objects.filter(path__in=_document_paths([request.path_info]))
            .values_list("content_type__app_label", "content_type__model")
            .first()
        )
        return f"{row[0]}.{row[1]}" if row else None

    @staticmethod
    def _should_inject(response: HttpResponseBase) -> bool:
        if not (app_settings.INJECT_LINK_TAG or app_settings.INJECT_NOTICE):
            return False
        if getattr(response, "agent_notice_exempt", False) or response.status_code in (204, 304):
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
            try:
                content = gzip.decompress(original) if gzipped else original
            except (OSError, EOFError, zlib.error):
                return  # Not gzip after all, or cut short: passed on as it is, not made a 500.
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


def _storable(path: str) -> bool:
    """Whether a path can be looked up among the documents' paths at all: a ``%00`` in the URL decodes to a NUL,
    which no PostgreSQL text value holds (the query would fail). Django has already replaced undecodable bytes,
    so NUL is the one character to rule out."""
    return "\x00" not in path


def _in_charset(fragments: _Fragments, charset: str) -> _Fragments | None:
    """The fragments (rendered as UTF-8) in the page's charset, characters it lacks as character references;
    None when the page is to be left as it is: a charset Python does not know, or one that does not write ASCII as
    ASCII (UTF-16: the tags looked for would not be found anyway)."""
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
    from .ahp.manifest import converse_path
    from .registry import AHP_VERSION

    return {
        "manifest_url": reverse("agent_handshake:manifest"),
        "llms_txt_url": reverse("agent_handshake:llms_txt"),
        "converse_url": converse_path(),
        "ahp_version": AHP_VERSION,
    }
