"""Discovery on every response (AHP §3): headers, the <link> tag, the in-page notice, negotiation."""

from __future__ import annotations

import gzip
import re

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from agent_handshake.middleware import HtmlInjector

pytestmark = pytest.mark.django_db

LINK_HEADER = '</.well-known/agent.json>; rel="ahp-manifest agent-manifest"; type="application/agent+json"'
LINK_TAG = '<link rel="agent-manifest" href="/.well-known/agent.json" type="application/agent+json">'
NOTICE = re.compile(
    r'<section class="ahp-notice" aria-label="AI Agent Notice" style="display:none" hidden>.*?</section>', re.DOTALL
)


def assert_discoverable(html: str) -> None:
    """The link tag sits in <head>, the notice in <body>, each exactly once, both in the raw HTML."""
    head, _, body = html.partition("</head>")
    assert head.count(LINK_TAG) == 1, head
    assert html.count(LINK_TAG) == 1
    notices = NOTICE.findall(body)
    assert len(notices) == 1, body[-600:]
    assert html.count("ahp-notice") == 1
    assert "GET /.well-known/agent.json" in notices[0]
    assert "AHP/0.1" in notices[0]
    assert body.index(notices[0]) < body.rindex("</body>") if "</body>" in body else True


def test_html_page_gets_link_tag_notice_and_headers(client):
    response = client.get("/page/")
    assert response.status_code == 200
    html = response.content.decode()
    assert_discoverable(html)
    assert "<h1>Plain page</h1>" in html
    assert response["Link"] == LINK_HEADER
    assert response["Content-Signal"] == "search=yes, ai-input=yes, ai-train=no"
    assert "Accept" in response["Vary"]


def test_content_length_matches_the_rewritten_body(client):
    response = client.get("/big/")
    assert_discoverable(response.content.decode())
    assert int(response["Content-Length"]) == len(response.content)
    assert len(response.content) > 100_000


def test_404_and_500_pages_carry_discovery(client):
    missing = client.get("/no/such/page/")
    assert missing.status_code == 404
    assert_discoverable(missing.content.decode())
    assert missing["Link"] == LINK_HEADER

    client.raise_request_exception = False
    broken = client.get("/broken/")
    assert broken.status_code == 500
    assert "Server error" in broken.content.decode()
    assert_discoverable(broken.content.decode())
    assert broken["Link"] == LINK_HEADER


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 4096])
def test_streaming_html_is_rewritten_chunk_by_chunk(client, chunk):
    response = client.get(f"/stream/?chunk={chunk}")
    assert response.streaming
    html = b"".join(response.streaming_content).decode()
    assert_discoverable(html)
    assert html.count("streamed words") == 200
    assert "Content-Length" not in response


def test_async_streaming_html_is_rewritten(async_client):
    @async_to_sync
    async def fetch():
        response = await async_client.get("/astream/?chunk=5")
        return response, b"".join([chunk async for chunk in response.streaming_content])

    response, content = fetch()
    assert response.streaming
    assert_discoverable(content.decode())
    assert response["Link"] == LINK_HEADER


def test_async_exempt_view_is_left_alone(async_client):
    response = async_to_sync(async_client.get)("/aexempt/")
    assert "<h1>Async exempt</h1>" in response.content.decode()
    assert "ahp-notice" not in response.content.decode()
    assert response["Link"] == LINK_HEADER


def test_non_html_is_untouched_but_gets_the_link_header(client):
    response = client.get("/json/")
    assert response.json() == {"html": "<html><head></head><body></body></html>", "n": 1}
    assert response["Link"] == LINK_HEADER
    assert response["Content-Signal"]


def test_gzip_middleware_outside_compresses_the_rewritten_page(client):
    response = client.get("/big/", headers={"Accept-Encoding": "gzip"})
    assert response["Content-Encoding"] == "gzip"
    html = gzip.decompress(response.content).decode()
    assert_discoverable(html)


def test_already_gzipped_body_is_rewritten_and_recompressed(client):
    response = client.get("/gzipped/")
    assert response["Content-Encoding"] == "gzip"
    assert int(response["Content-Length"]) == len(response.content)
    assert_discoverable(gzip.decompress(response.content).decode())


def test_other_encodings_are_left_byte_for_byte(client):
    response = client.get("/brotli/")
    assert response.content == b"\x8b\x03\x80not-really-brotli"
    assert response["Link"] == LINK_HEADER


def test_exempt_view_keeps_its_html(client):
    response = client.get("/exempt/")
    assert "ahp-notice" not in response.content.decode()
    assert "agent-manifest" not in response.content.decode()
    assert response["Link"] == LINK_HEADER


def test_template_tags_place_the_markup_and_it_is_not_doubled(client):
    html = client.get("/tagged/").content.decode()
    assert_discoverable(html)
    assert html.index("ahp-notice") > html.index("<footer>")


def test_fragment_without_html_element_gets_no_notice(client):
    response = client.get("/fragment/")
    assert response.content == b"<li>an htmx fragment</li>"


def test_document_without_body_end_tag_still_gets_the_notice(client):
    html = client.get("/nobody/").content.decode()
    assert LINK_TAG in html
    assert NOTICE.search(html)


def test_view_etag_is_weakened_when_the_body_changes(client):
    response = client.get("/page/?etag=1")
    assert response["ETag"] == 'W/"fixed-etag"'


def test_existing_link_header_is_kept(client):
    response = client.get("/page/?link=1")
    assert response["Link"] == f"</static/site.css>; rel=preload; as=style, {LINK_HEADER}"


def test_accept_agent_json_on_any_url_answers_with_the_manifest(client):
    response = client.get("/page/", headers={"Accept": "application/agent+json"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["ahp"] == "0.1"
    assert response["Link"] == LINK_HEADER
    assert "Accept" in response["Vary"]
    # q=0 means "not acceptable", and a browser's Accept does not trigger it.
    refused = client.get("/page/", headers={"Accept": "text/html, application/agent+json;q=0"})
    assert "<h1>Plain page</h1>" in refused.content.decode()
    browser = client.get("/page/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert "<h1>Plain page</h1>" in browser.content.decode()


def test_settings_turn_injection_off(client):
    with override_settings(AGENT_HANDSHAKE={"INJECT_NOTICE": False, "INJECT_LINK_TAG": False}):
        html = client.get("/page/").content.decode()
        assert "ahp-notice" not in html
        assert "agent-manifest" not in html


def test_exempt_paths_are_left_entirely_alone(client):
    with override_settings(AGENT_HANDSHAKE={"EXEMPT_PATHS": [r"^/page/"]}):
        response = client.get("/page/")
        assert "Link" not in response
        assert "ahp-notice" not in response.content.decode()
        assert "Link" in client.get("/big/")


def test_custom_notice_template(client, tmp_path, settings):
    (tmp_path / "my_notice.html").write_text(
        '<aside class="ahp-notice" aria-label="AI Agent Notice">Hi, agent.</aside>'
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    settings.AGENT_HANDSHAKE = {"NOTICE_TEMPLATE": "my_notice.html"}
    html = client.get("/page/").content.decode()
    assert html.count("Hi, agent.") == 1


def test_injector_finds_tags_split_across_every_boundary():
    page = b"<html><HEAD><title>x</title></HEAD><body><p>text</p></BODY></html>"
    expected = HtmlInjector(b"[L]", b"[N]").rewrite(page)
    assert expected == b"<html><HEAD><title>x</title>[L]</HEAD><body><p>text</p>[N]</BODY></html>"
    for cut in range(1, len(page)):
        injector = HtmlInjector(b"[L]", b"[N]")
        out = injector.feed(page[:cut]) + injector.feed(page[cut:]) + injector.finish()
        assert out == expected, cut


def test_a_streamed_page_gets_the_notice_before_its_body_end_tag_not_one_in_a_script_or_comment():
    """A stream was given the notice before the first "</body>" it saw: one in a script's string, a comment, a
    style sheet or a textarea's text. Every way of cutting the page into chunks now gives what the whole page
    gets (the last "</body>"), and so does a byte at a time."""
    page = (
        b"<html><head><title>a </body> b</title><SCRIPT type=module>const end = '</body>';</SCRIPT>"
        b"<style>/* </body> */</style></head><body><!-- </body> --><textarea></body></textarea><!-->"
        b"<p>text</p></body></html>"
    )
    expected = HtmlInjector(b"[L]", b"[N]").rewrite(page)
    assert expected == page.replace(b"</head>", b"[L]</head>").replace(b"</p></body>", b"</p>[N]</body>")
    for cut in range(1, len(page)):
        injector = HtmlInjector(b"[L]", b"[N]")
        out = injector.feed(page[:cut]) + injector.feed(page[cut:]) + injector.finish()
        assert out == expected, cut
    injector = HtmlInjector(b"[L]", b"[N]")
    assert b"".join(injector.feed(page[i : i + 1]) for i in range(len(page))) + injector.finish() == expected


def test_injector_sees_markers_split_across_every_boundary():
    from agent_handshake.middleware import placed_marker

    link_marker, notice_marker = placed_marker("link").encode(), placed_marker("notice").encode()
    page = b"<html><head>[L]" + link_marker + b"</head><body><p>text</p>[N]" + notice_marker + b"</body></html>"
    for cut in range(1, len(page)):
        injector = HtmlInjector(b"[L]", b"[N]", link_marker, notice_marker)
        assert injector.feed(page[:cut]) + injector.feed(page[cut:]) + injector.finish() == page, cut


# Only the app's own template tags may stop the injection (issue 9 §4): never what a page's content says.


def test_page_content_cannot_suppress_the_link_or_the_notice(client, publish):
    from django.template.loader import render_to_string

    from agent_handshake.middleware import notice_context
    from tests.testapp.models import Article

    notice_start = render_to_string("agent_handshake/notice.html", notice_context()).strip()[:64]
    article = publish(
        Article,
        title="What goes in an agent-manifest?",
        slug="manifests",
        body=f"<p>Our notice begins like this:</p><pre>{notice_start}</pre>",
    )
    html = client.get(article.get_absolute_url()).content.decode()
    head, _, body = html.partition("</head>")
    assert head.count(LINK_TAG) == 1, head
    notices = NOTICE.findall(body)
    assert len(notices) == 1, body
    assert "GET /.well-known/agent.json" in notices[0]


def test_template_tags_suppress_only_their_own_request(client):
    assert_discoverable(client.get("/tagged/").content.decode())
    assert_discoverable(client.get("/page/").content.decode())  # the next page still gets the markup


def test_template_tags_are_seen_by_the_async_middleware(async_client):
    response = async_to_sync(async_client.get)("/tagged/")
    html = response.content.decode()
    assert_discoverable(html)
    assert html.index("ahp-notice") > html.index("<footer>")


# Content negotiation honours q-values, one parser for the manifest and the markdown versions (issue 9 §4).


@pytest.mark.parametrize(
    ("accept", "manifest"),
    [
        ("text/html;q=1, application/agent+json;q=0.1", False),
        ("text/html, application/xhtml+xml, application/agent+json;q=0.5, */*;q=0.1", False),
        ("application/agent+json;q=0.9, text/html;q=0.5", True),
        ("application/agent+json, text/html;q=0.9", True),
        ("application/agent+json", True),
    ],
)
def test_accept_agent_json_honours_q_values(client, accept, manifest):
    response = client.get("/page/", headers={"Accept": accept})
    assert response.status_code == 200
    if manifest:
        assert response.json()["ahp"] == "0.1"
    else:
        assert "<h1>Plain page</h1>" in response.content.decode()
    assert "Accept" in response["Vary"]


# A cached page or fragment already carries the markup, and no tag runs on a cache hit: it is still not doubled.

PER_SITE_CACHE = [
    "django.middleware.cache.UpdateCacheMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "agent_handshake.middleware.AgentDiscoveryMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.cache.FetchFromCacheMiddleware",
]


@pytest.fixture
def empty_cache():
    from django.core.cache import cache

    cache.clear()
    yield cache
    cache.clear()


@pytest.mark.parametrize("url", ["/page/", "/tagged/"])
def test_per_site_cache_hit_is_not_injected_twice(client, empty_cache, url):
    with override_settings(MIDDLEWARE=PER_SITE_CACHE):
        first = client.get(url)
        second = client.get(url)
    assert first.has_header("Expires")  # the per-site cache stored it ...
    assert second.content == first.content  # ... and the second answer is the stored page
    assert_discoverable(first.content.decode())
    assert_discoverable(second.content.decode())


def test_cache_page_hit_is_not_injected_twice(client, empty_cache):
    first = client.get("/cached-tagged/")
    second = client.get("/cached-tagged/")
    assert first.has_header("Expires")
    assert_discoverable(first.content.decode())
    assert_discoverable(second.content.decode())
    assert second.content.decode().index("ahp-notice") > second.content.decode().index("<footer>")


def test_cached_template_fragments_are_not_injected_twice(client, empty_cache):
    from django.core.cache.utils import make_template_fragment_key

    for _ in range(2):
        html = client.get("/cached-fragments/").content.decode()
        assert_discoverable(html)
        assert html.index("ahp-notice") > html.index("<footer>")
    assert "ahp-notice" in empty_cache.get(make_template_fragment_key("agent_notice_fragment"))


def test_a_quoted_marker_does_not_suppress_the_notice(client, publish):
    from django.utils.html import escape

    from agent_handshake.middleware import placed_marker
    from tests.testapp.models import Article

    quoted = escape(placed_marker("link") + placed_marker("notice"))
    article = publish(Article, title="Page source", slug="source", body=f"<pre>{quoted}</pre>")
    assert_discoverable(client.get(article.get_absolute_url()).content.decode())


# The app mounted under a sub-path: reverse() includes the script prefix, request.path_info does not.


@pytest.fixture
def mounted_under_sub():
    """What Django's WSGI and ASGI handlers do for a request with ``SCRIPT_NAME: /sub`` (the test client does not)."""
    from django.urls import clear_script_prefix, set_script_prefix

    set_script_prefix("/sub/")
    yield "/sub"
    clear_script_prefix()


def test_endpoints_under_a_sub_path_answer_an_agent_json_request_themselves(client, mounted_under_sub):
    accept = "application/agent+json"
    poll = client.get("/agent/converse/status/some-job", SCRIPT_NAME=mounted_under_sub, HTTP_ACCEPT=accept)
    assert poll.status_code == 401, poll.content
    assert poll.json()["code"] == "auth_required"
    converse = client.get("/agent/converse", SCRIPT_NAME=mounted_under_sub, HTTP_ACCEPT=accept)
    assert converse.status_code == 405
    assert converse.json()["code"] == "method_not_allowed"
    page = client.get("/page/", SCRIPT_NAME=mounted_under_sub, HTTP_ACCEPT=accept)
    assert page.json()["ahp"] == "0.1"  # any other URL still answers with the manifest


# A page in another charset than UTF-8 (a legacy site's Latin-1 pages).


def latin1_page(request):
    from django.http import HttpResponse

    page = "<!DOCTYPE html><html><head><title>Thé</title></head><body><p>Thé vert</p></body></html>"
    return HttpResponse(page.encode("latin-1"), content_type="text/html; charset=iso-8859-1")


def broken_gzip_page(request):
    from django.http import HttpResponse

    body = gzip.compress(b"<!DOCTYPE html><html><head></head><body><p>cut short</p></body></html>", mtime=0)[:-6]
    response = HttpResponse(body)
    response.headers["Content-Encoding"] = "gzip"
    return response


#: The chunks ``script_stream`` has handed out so far.
PULLED: list[bytes] = []


def script_stream(request):
    """A streamed page whose first chunk has a "</body>" in a script's string, as a player's or an editor's may."""
    from django.http import StreamingHttpResponse

    chunks = [
        b"<!DOCTYPE html><html><head><title>Player</title></head><body>"
        b"<script>const end = '</body>'; // where the player stops reading</script>\n"
        b"<h1>Now playing</h1><p>" + b"intro words " * 10 + b"</p>\n",
        b"<p>first streamed part, sent before the rest is written: " + b"more words " * 20 + b"</p>\n",
        b"<p>second streamed part, sent before the rest is written: " + b"more words " * 20 + b"</p>\n",
        b"</body></html>\n",
    ]

    def pulled():
        for chunk in chunks:
            PULLED.append(chunk)
            yield chunk

    return StreamingHttpResponse(pulled(), content_type="text/html; charset=utf-8")


def _latin1_urls():
    from django.urls import include, path

    return [
        path("latin1/", latin1_page),
        path("broken-gzip/", broken_gzip_page),
        path("script-stream/", script_stream),
        path("", include("tests.urls")),
    ]


urlpatterns = _latin1_urls()


@override_settings(ROOT_URLCONF=__name__)
def test_notice_is_written_in_the_page_charset(client, tmp_path, settings):
    """The link tag and notice were inserted as UTF-8 bytes whatever the page's charset: a notice with "ü" read
    "Ã¼" in a Latin-1 page; a character the charset lacks becomes a character reference."""
    (tmp_path / "de_notice.html").write_text(
        '<aside class="ahp-notice" aria-label="AI Agent Notice">Für KI-Agenten ✓: {{ manifest_url }}</aside>',
        encoding="utf-8",
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    settings.AGENT_HANDSHAKE = {"NOTICE_TEMPLATE": "de_notice.html"}
    response = client.get("/latin1/")
    html = response.content.decode("latin-1")
    assert "<p>Thé vert</p>" in html
    assert "Für KI-Agenten &#10003;: /.well-known/agent.json</aside>" in html
    assert html.count(LINK_TAG) == 1
    assert int(response["Content-Length"]) == len(response.content)


@override_settings(ROOT_URLCONF=__name__)
def test_a_gzip_body_that_does_not_decompress_is_passed_on_not_a_500(client):
    """A view (a proxy, say) whose gzip body is cut short: gzip.decompress raised and the page became a 500."""
    client.raise_request_exception = False
    response = client.get("/broken-gzip/")
    assert response.status_code == 200
    assert response.content == broken_gzip_page(None).content
    assert response["Link"] == LINK_HEADER


@override_settings(ROOT_URLCONF=__name__)
def test_a_streamed_page_keeps_its_script_and_still_streams(client):
    """The notice went into the first chunk's script (inside its JavaScript string): it goes before the page's
    own "</body>", and each chunk still reaches the client before the view is asked for the next one."""
    PULLED.clear()
    response = client.get("/script-stream/")
    assert response.streaming
    received, pulled_when = b"", {}
    for piece in response.streaming_content:
        received += piece
        for phrase in (b"// where the player stops", b"first streamed part", b"second streamed part"):
            if phrase in received:
                pulled_when.setdefault(phrase, len(PULLED))
    html = received.decode()
    assert pulled_when == {b"// where the player stops": 1, b"first streamed part": 2, b"second streamed part": 3}
    assert "<script>const end = '</body>'; // where the player stops reading</script>" in html
    assert_discoverable(html)
    assert html.index("ahp-notice") > html.index("second streamed part")
    assert html.endswith("</body></html>\n")
