"""Where the discovery middleware inserts the <link> tag and the notice: before the page's real ``</head>`` and
``</body>``, the end tags the browser reads as markup, not a "</head>" or "</body>" written in a script, a style
sheet, a comment, a template, an element's text or an attribute value; in a whole page and in a stream alike."""

from __future__ import annotations

import re

import pytest
from django.http import HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.urls import include, path

from agent_handshake.middleware import HtmlInjector

pytestmark = pytest.mark.django_db

LINK_TAG = '<link rel="agent-manifest" href="/.well-known/agent.json" type="application/agent+json">'
LINK_MARKER = r"<!--agent-handshake:link:[0-9a-f]{32}-->"
NOTICE = r'<section class="ahp-notice" aria-label="AI Agent Notice" style="display:none" hidden>.*?</section>'
NOTICE_MARKER = r"<!--agent-handshake:notice:[0-9a-f]{32}-->"

#: A recipe page whose head writes a whole print page from JavaScript, as "print this recipe" buttons do.
PRINT_SCRIPT_PAGE = b"""<!DOCTYPE html>
<html><head><title>Recipe</title>
<script>
function printRecipe() {
  const w = window.open("", "print");
  w.document.write("<html><head><title>Print</title></head><body>");
  w.document.write(document.querySelector("article").innerHTML + "</body></html>");
}
</script>
<style>/* keep in sync with </head> of print.html */ article { margin: 0 }</style>
<!-- </head> ends below -->
<template id="card"><header>a card</head></header></template>
<noscript><p>Printing needs JavaScript</head></p></noscript>
</head>
<body><article><h1>Sencha</h1><p>Steep for a minute.</p></article>
<button onclick="printRecipe()">Print</button>
</body></html>
"""

#: A page whose markup carries "</head>" and "</body>" in attribute values (data for a script, a tooltip).
ATTRIBUTE_PAGE = b"""<!DOCTYPE html>
<html><head><title>Snippets</title>
<meta name="description" content='How to close a page: </head> then </body>'>
</head>
<body><h1>Closing tags</h1>
<div data-snippet="</body></html>" title='ends with </body>'><p>The last tags of a page.</p></div>
<p data-x=a class=note>An unquoted attribute</p>
</body></html>
"""


def _whole(page):
    def view(request):
        return HttpResponse(page, content_type="text/html; charset=utf-8")

    return view


def _streamed(page):
    def view(request):
        size = int(request.GET.get("chunk", 7))
        chunks = (page[i : i + size] for i in range(0, len(page), size))
        return StreamingHttpResponse(chunks, content_type="text/html; charset=utf-8")

    return view


urlpatterns = [
    path("print-script/", _whole(PRINT_SCRIPT_PAGE)),
    path("print-script/stream/", _streamed(PRINT_SCRIPT_PAGE)),
    path("attributes/", _whole(ATTRIBUTE_PAGE)),
    path("attributes/stream/", _streamed(ATTRIBUTE_PAGE)),
    path("", include("tests.urls")),
]


def fetch(client, url: str) -> bytes:
    response = client.get(url)
    assert response.status_code == 200
    return b"".join(response.streaming_content) if response.streaming else response.content


def assert_placed_before_the_real_end_tags(html: bytes, page: bytes, head_end: bytes, body_end: bytes) -> None:
    """``html`` is ``page`` with the link tag right before the ``head_end`` text's "</head>" and the notice right
    before the ``body_end`` text's "</body>", and nothing else changed."""
    text, original = html.decode(), page.decode()
    link = re.escape(LINK_TAG) + LINK_MARKER
    notice = NOTICE + NOTICE_MARKER
    assert len(re.findall(link, text)) == 1, text
    assert len(re.findall(notice, text, re.DOTALL)) == 1, text
    assert re.search(link + re.escape(head_end.decode()), text), text
    assert re.search(notice + re.escape(body_end.decode()), text, re.DOTALL), text
    assert re.sub(notice, "", re.sub(link, "", text), flags=re.DOTALL) == original


def assert_every_cut_gives_the_whole_page_result(page: bytes, expected: bytes) -> None:
    assert HtmlInjector(b"[L]", b"[N]").rewrite(page) == expected
    for cut in range(1, len(page)):
        injector = HtmlInjector(b"[L]", b"[N]")
        assert injector.feed(page[:cut]) + injector.feed(page[cut:]) + injector.finish() == expected, cut
    injector = HtmlInjector(b"[L]", b"[N]")
    assert b"".join(injector.feed(page[i : i + 1]) for i in range(len(page))) + injector.finish() == expected


# 1. A "</head>" in the head's script, style, comment, template or noscript text is not the head's end tag.


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/print-script/", "/print-script/stream/?chunk=7", "/print-script/stream/?chunk=4096"])
def test_the_link_tag_goes_before_the_real_head_end_tag_not_one_in_a_script(client, url):
    """The link tag went into the script's JavaScript string (``document.write("<html><head><title>Print</title>
    [link]</head>...")``), breaking the print page's script and leaving the page's head without the tag."""
    html = fetch(client, url)
    assert_placed_before_the_real_end_tags(html, PRINT_SCRIPT_PAGE, b"</head>\n<body><article>", b"</body></html>\n")
    assert b'w.document.write("<html><head><title>Print</title></head><body>");' in html


def test_the_injector_finds_the_real_head_end_tag_at_every_chunk_boundary():
    real = b"</head>\n<body><article>"
    expected = PRINT_SCRIPT_PAGE.replace(real, b"[L]" + real).replace(b"</body></html>\n", b"[N]</body></html>\n")
    assert_every_cut_gives_the_whole_page_result(PRINT_SCRIPT_PAGE, expected)


def test_a_whole_page_gets_the_notice_before_its_end_tag_not_in_a_script_after_it():
    """A whole page got the notice before its last "</body>", which a script after the body's end tag (as tag
    managers add) may write: the notice went into the script's string. Whole and streamed pages now find the same
    end tag, the first that is markup."""
    page = b'<html><head></head><body><p>x</p></body>\n<script>document.write("</body>")</script></html>'
    expected = page.replace(b"</head>", b"[L]</head>").replace(b"</p></body>", b"</p>[N]</body>")
    assert_every_cut_gives_the_whole_page_result(page, expected)


# 2. A "</body>" (or "</head>") in an attribute value is not an end tag.


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/attributes/", "/attributes/stream/?chunk=1", "/attributes/stream/?chunk=9"])
def test_the_notice_goes_before_the_real_body_end_tag_not_one_in_an_attribute(client, url):
    """A streamed page got the notice inside the ``data-snippet`` attribute's value, which then read
    "<section class=..." in the page's script, and the notice's own text showed as a broken tag."""
    html = fetch(client, url)
    assert_placed_before_the_real_end_tags(html, ATTRIBUTE_PAGE, b"</head>\n<body><h1>", b"</body></html>\n")
    assert b"<div data-snippet=\"</body></html>\" title='ends with </body>'>" in html


def test_the_injector_skips_attribute_values_at_every_chunk_boundary():
    real_head, real_body = b"</head>\n<body><h1>", b"</p>\n</body></html>\n"
    expected = ATTRIBUTE_PAGE.replace(real_head, b"[L]" + real_head).replace(real_body, b"</p>\n[N]</body></html>\n")
    assert_every_cut_gives_the_whole_page_result(ATTRIBUTE_PAGE, expected)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        # (These pages omit "</head>": the link tag goes before the body's start tag, where the head ends.)
        # A quote only opens a value after "=": elsewhere it is part of an attribute's name.
        (b'<html><body><p a"b=">"></body></html>', b'<html>[L]<body><p a"b=">">[N]</body></html>'),
        (b"<html><body><p a'=x></body></html>", b"<html>[L]<body><p a'=x>[N]</body></html>"),
        # An unquoted value ends at a space or ">", quotes in it included.
        (b'<html><body><p a=b"c></body></html>', b'<html>[L]<body><p a=b"c>[N]</body></html>'),
        (b"<html><body><p a = '</body>' / ></body></html>", b"<html>[L]<body><p a = '</body>' / >[N]</body></html>"),
        # An end tag's (ignored) attributes are read the same way.
        (b'<html><body></p x="</body>"></body></html>', b'<html>[L]<body></p x="</body>">[N]</body></html>'),
        # A script's end tag may carry attributes too; text after it is markup again.
        (
            b"<html><body><script>a</script x='>'></body></html>",
            b"<html>[L]<body><script>a</script x='>'>[N]</body></html>",
        ),
        # "<" that opens no tag, "</" that opens a bogus comment.
        (b"<html><body>1 < 2 <3 </ x></body></html>", b"<html>[L]<body>1 < 2 <3 </ x>[N]</body></html>"),
        (b"<html><body><!x </body> --></body></html>", b"<html>[L]<body><!x </body> -->[N]</body></html>"),
    ],
)
def test_the_injector_reads_tags_as_the_html_tokenizer_does(page, expected):
    assert_every_cut_gives_the_whole_page_result(page, expected)
