"""The discovery middleware on the pages and responses at the edges of HTML and HTTP: a page that ends its body
twice, one that omits its optional head end tag (or every optional tag), a byte range, a download, a 304, a page
whose charset only its ``<meta>`` says, XHTML, HEAD requests, other charsets."""

from __future__ import annotations

import html
import io
import re

import pytest
from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.urls import include, path
from django.views.decorators.http import etag

from agent_handshake.middleware import HtmlInjector

pytestmark = pytest.mark.django_db

LINK_HEADER = '</.well-known/agent.json>; rel="ahp-manifest agent-manifest"; type="application/agent+json"'
LINK_TAG = b'<link rel="agent-manifest" href="/.well-known/agent.json" type="application/agent+json">'
LINK_MARKER = rb"<!--agent-handshake:link:[0-9a-f]{32}-->"
NOTICE = rb'<section class="ahp-notice" aria-label="AI Agent Notice" style="display:none" hidden>.*?</section>'
NOTICE_MARKER = rb"<!--agent-handshake:notice:[0-9a-f]{32}-->"

PAGE = b"<!DOCTYPE html><html><head><title>T</title></head><body><p>x</p></body></html>"


def rewritten(page: bytes) -> bytes:
    """What the middleware's injector makes of ``page`` (``[L]`` the link tag, ``[N]`` the notice), the same whole
    and however a stream cuts it (in two anywhere, or a byte at a time)."""
    whole = HtmlInjector(b"[L]", b"[N]").rewrite(page)
    for cut in range(1, len(page)):
        injector = HtmlInjector(b"[L]", b"[N]")
        assert injector.feed(page[:cut]) + injector.feed(page[cut:]) + injector.finish() == whole, cut
    injector = HtmlInjector(b"[L]", b"[N]")
    assert b"".join(injector.feed(page[i : i + 1]) for i in range(len(page))) + injector.finish() == whole
    return whole


def _stream(page: bytes, size: int = 5) -> StreamingHttpResponse:
    return StreamingHttpResponse(
        (page[i : i + size] for i in range(0, len(page), size)), content_type="text/html; charset=utf-8"
    )


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


# 1. A page that ends its body twice.

TWICE = b"<html><head></head><body><p>x</p></body>\n<p>pasted</p></body></html>"


def test_a_page_whose_body_ends_twice_gets_the_notice_once_before_one_of_its_body_end_tags():
    """Both "</body>" are markup: the browser reads what follows the first back into the body (WHATWG HTML
    §13.2.6.4.19 "after body"), so the notice is in the body before either. A whole page gets it before the last
    (found from the page's end, without reading the body), a stream before the first (it cannot wait for the
    last without holding the rest of the page back)."""
    whole = HtmlInjector(b"[L]", b"[N]").rewrite(TWICE)
    assert whole == TWICE.replace(b"</head>", b"[L]</head>").replace(b"pasted</p></body>", b"pasted</p>[N]</body>")
    injector = HtmlInjector(b"[L]", b"[N]")
    streamed = b"".join(injector.feed(TWICE[i : i + 4]) for i in range(0, len(TWICE), 4)) + injector.finish()
    assert streamed == TWICE.replace(b"</head>", b"[L]</head>").replace(b"x</p></body>", b"x</p>[N]</body>")


# 2. A page that omits its head end tag (HTML allows it), or every optional tag.


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (
            b"<!DOCTYPE html><html><head><title>T</title>\n<body><p>x</p></body></html>",
            b"<!DOCTYPE html><html><head><title>T</title>\n[L]<body><p>x</p>[N]</body></html>",
        ),
        (
            b'<HTML><HEAD lang=en><SCRIPT>w("</head><body>")</SCRIPT><!-- <body> --><BODY class="a>b"><P>x</HTML>',
            b'<HTML><HEAD lang=en><SCRIPT>w("</head><body>")</SCRIPT><!-- <body> -->[L]<BODY class="a>b"><P>x</HTML>'
            b"[N]",
        ),
        # No head start tag either: a link before <body> is still in the head the parser makes.
        (b"<html><title>T</title><body>x</body></html>", b"<html><title>T</title>[L]<body>x[N]</body></html>"),
    ],
)
def test_a_page_without_a_head_end_tag_gets_the_link_tag_before_its_body_start_tag(page, expected):
    """HTML lets a page omit "</head>": the head then ends at the body's start tag (§13.2.6.4.4), where the link
    tag goes. Such a page got no link tag at all."""
    assert rewritten(page) == expected


def test_a_head_end_tag_still_wins_over_the_body_start_tag_after_it():
    page = b"<html><head><title>T</title></head>\n<body><p>x</p></body></html>"
    assert rewritten(page) == page.replace(b"</head>", b"[L]</head>").replace(b"x</p>", b"x</p>[N]")


def test_a_page_without_head_end_nor_body_start_tag_relies_on_the_link_header():
    """Nothing in the page says where its head ends (short of parsing it as the browser does): no link tag is
    guessed in, the Link header says it (see the view test below), and the notice still goes in."""
    page = b"<html><head><title>T</title><p>x</p></body></html>"
    assert rewritten(page) == b"<html><head><title>T</title><p>x</p>[N]</body></html>"


def test_a_document_that_omits_its_html_start_tag_still_gets_the_notice():
    """A page that starts with its doctype is a document, not a fragment, even when it leaves out every optional
    tag (``<!DOCTYPE html><title>...</title><p>...``, as some style guides advise). It got no notice: only a
    page with an ``<html>`` start tag did."""
    page = b"<!doctype HTML>\n<title>T</title>\n<p>x"
    assert rewritten(page) == page + b"[N]"
    assert rewritten(b"<li>an htmx fragment</li>") == b"<li>an htmx fragment</li>"


# Views for the HTTP tests.

OMITTED_HEAD_END = b"<!DOCTYPE html><html><head><title>T</title>\n<body><p>x</p></body></html>"
NO_HEAD_END_NOR_BODY_START = b"<!DOCTYPE html><html><head><title>T</title><p>x</p></body></html>"


def omitted_head_end(request):
    return HttpResponse(OMITTED_HEAD_END)


def omitted_head_end_streamed(request):
    return _stream(OMITTED_HEAD_END)


def no_head_end_nor_body_start(request):
    return HttpResponse(NO_HEAD_END_NOR_BODY_START)


def partial_content(request):
    """A byte range of a page (a view that honours Range)."""
    response = HttpResponse(PAGE[:60], status=206)
    response.headers["Content-Range"] = f"bytes 0-59/{len(PAGE)}"
    return response


def partial_content_streamed(request):
    response = _stream(PAGE[:60])
    response.status_code = 206
    response.headers["Content-Range"] = f"bytes 0-59/{len(PAGE)}"
    return response


def download(request):
    """A page offered as a file to save ("export this page"), not shown."""
    response = HttpResponse(PAGE)
    response.headers["Content-Disposition"] = 'attachment; filename="page.html"'
    return response


def file_download(request):
    return FileResponse(io.BytesIO(PAGE), as_attachment=True, filename="page.html")


def file_inline(request):
    return FileResponse(io.BytesIO(PAGE), filename="page.html")


@etag(lambda request: '"v1"')
def tagged_page(request):
    return HttpResponse(PAGE)


@etag(lambda request: '"v1"')
def tagged_json(request):
    return HttpResponse(b"{}", content_type="application/json")


def meta_charset_page(request):
    """A legacy page whose charset only its <meta> says (the Content-Type has none)."""
    page = (
        '<!DOCTYPE html><html><head><meta charset="windows-1252"><title>Thé</title></head>'
        "<body><p>Thé vert, 3 €</p></body></html>"
    )
    return HttpResponse(page.encode("windows-1252"), content_type="text/html")


def windows_1252_page(request):
    page = "<!DOCTYPE html><html><head><title>Thé</title></head><body><p>Thé vert, 3 €</p></body></html>"
    return HttpResponse(page.encode("windows-1252"), content_type="text/html; charset=windows-1252")


def xhtml_page(request):
    page = (
        b'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>T</title>'
        b"</head><body><p>x</p></body></html>"
    )
    return HttpResponse(page, content_type="application/xhtml+xml; charset=utf-8")


urlpatterns = [
    path("omitted-head-end/", omitted_head_end),
    path("omitted-head-end/stream/", omitted_head_end_streamed),
    path("no-head-end-nor-body-start/", no_head_end_nor_body_start),
    path("partial/", partial_content),
    path("partial/stream/", partial_content_streamed),
    path("download/", download),
    path("file-download/", file_download),
    path("file-inline/", file_inline),
    path("etag/", tagged_page),
    path("etag.json", tagged_json),
    path("meta-charset/", meta_charset_page),
    path("windows-1252/", windows_1252_page),
    path("xhtml/", xhtml_page),
    path("", include("tests.urls")),
]


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/omitted-head-end/", "/omitted-head-end/stream/"])
def test_a_served_page_without_a_head_end_tag_gets_the_link_tag_in_its_head(client, url):
    response = client.get(url)
    page = body_of(response)
    assert re.search(rb"<title>T</title>\n" + re.escape(LINK_TAG) + LINK_MARKER + rb"<body>", page), page
    assert re.search(rb"<p>x</p>" + NOTICE + NOTICE_MARKER + rb"</body>", page, re.DOTALL), page
    assert response["Link"] == LINK_HEADER


@override_settings(ROOT_URLCONF=__name__)
def test_a_served_page_with_no_place_for_the_link_tag_still_sends_the_link_header(client):
    response = client.get("/no-head-end-nor-body-start/")
    assert LINK_TAG not in response.content
    assert re.search(NOTICE, response.content, re.DOTALL)
    assert response["Link"] == LINK_HEADER
    assert int(response["Content-Length"]) == len(response.content)


# 3. Responses that are not a whole page to show.


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/partial/", "/partial/stream/"])
def test_a_byte_range_is_left_as_it_is(client, url):
    """A 206 got the notice appended to its range (which has "<html" but no "</body>"): the bytes no longer
    matched ``Content-Range``, and a client joining the ranges got a broken page."""
    response = client.get(url)
    assert response.status_code == 206
    assert body_of(response) == PAGE[:60]
    assert response["Content-Range"] == f"bytes 0-59/{len(PAGE)}"
    assert response["Link"] == LINK_HEADER


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/download/", "/file-download/"])
def test_a_page_offered_as_a_download_is_saved_as_it_is(client, url):
    """``Content-Disposition: attachment`` (``FileResponse(as_attachment=True)``): the browser saves the file and
    shows nothing; the saved HTML file carried our link tag and notice."""
    response = client.get(url)
    assert body_of(response) == PAGE
    assert response["Link"] == LINK_HEADER


@override_settings(ROOT_URLCONF=__name__)
def test_an_html_file_shown_inline_is_rewritten_and_its_length_dropped(client):
    response = client.get("/file-inline/")
    page = body_of(response)
    assert re.search(re.escape(LINK_TAG) + LINK_MARKER + rb"</head>", page)
    assert re.search(NOTICE + NOTICE_MARKER + rb"</body>", page, re.DOTALL)
    assert "Content-Length" not in response  # FileResponse set the file's; the stream is longer now


# 4. Conditional requests.


@override_settings(ROOT_URLCONF=__name__)
def test_a_304_names_the_weakened_etag_its_200_was_sent_with(client):
    """The rewritten 200 carried ``W/"v1"`` (its body is not the view's byte for byte), the view's 304 to
    ``If-None-Match: W/"v1"`` the strong ``"v1"``: a cache holding ``W/"v1"`` must not freshen it with a 304 whose
    strong validator no stored response has (RFC 9111 §4.3.4), so the page was never revalidated."""
    first = client.get("/etag/")
    assert first["ETag"] == 'W/"v1"'
    again = client.get("/etag/", headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304
    assert again["ETag"] == 'W/"v1"'
    assert again["Link"] == LINK_HEADER


@override_settings(ROOT_URLCONF=__name__)
def test_a_304_for_a_strong_etag_keeps_it_strong(client):
    first = client.get("/etag.json")
    assert first["ETag"] == '"v1"'
    again = client.get("/etag.json", headers={"If-None-Match": '"v1"'})
    assert again.status_code == 304
    assert again["ETag"] == '"v1"'


# 5. Charsets.


@pytest.fixture
def german_notice(tmp_path):
    """A notice template with characters outside ASCII (one outside windows-1252 too)."""
    from django.conf import settings

    (tmp_path / "de_notice.html").write_text(
        '<aside class="ahp-notice" aria-label="AI Agent Notice">Für KI-Agenten ✓: {{ manifest_url }}</aside>',
        encoding="utf-8",
    )
    templates = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    with override_settings(TEMPLATES=templates, AGENT_HANDSHAKE={"NOTICE_TEMPLATE": "de_notice.html"}):
        yield


@override_settings(ROOT_URLCONF=__name__)
def test_a_page_with_no_declared_charset_gets_the_notice_readable_in_any_charset(client, german_notice):
    """``text/html`` without a charset: the browser takes the page's ``<meta charset>`` (here windows-1252), not
    Django's DEFAULT_CHARSET, but the notice was written in UTF-8, so it read "FÃ¼r KI-Agenten âœ“". Written in
    ASCII with character references, it reads the same in whatever charset the browser settles on."""
    response = client.get("/meta-charset/")
    notice = re.search(rb"<aside .*?</aside>", response.content).group()
    assert notice.isascii()
    text = html.unescape(response.content.decode("windows-1252"))
    assert "Für KI-Agenten ✓: /.well-known/agent.json</aside>" in text
    assert "<p>Thé vert, 3 €</p>" in text
    assert int(response["Content-Length"]) == len(response.content)


@override_settings(ROOT_URLCONF=__name__)
def test_a_windows_1252_page_gets_the_notice_in_windows_1252(client, german_notice):
    response = client.get("/windows-1252/")
    text = response.content.decode("windows-1252")
    assert "Für KI-Agenten &#10003;: /.well-known/agent.json</aside>" in text
    assert "<p>Thé vert, 3 €</p>" in text
    assert text.count(LINK_TAG.decode()) == 1


# 6. XHTML and HEAD.


@override_settings(ROOT_URLCONF=__name__)
def test_xhtml_is_left_alone_and_gets_the_link_header(client):
    """An XML parser reads ``application/xhtml+xml``: the link tag (``<link ...>``, not ``<link .../>``) or a
    notice template that is not well-formed XML would make the browser show an XML error instead of the page."""
    response = client.get("/xhtml/")
    assert response.content == xhtml_page(None).content
    assert response["Link"] == LINK_HEADER


def test_a_head_request_gets_the_length_and_headers_of_the_rewritten_page(client):
    page = client.get("/page/")
    head = client.head("/page/")
    assert head.status_code == 200
    assert head.content == b""
    assert head["Content-Length"] == page["Content-Length"] == str(len(page.content))
    assert head["Link"] == LINK_HEADER
