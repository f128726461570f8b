"""A gzip page the middleware rewrites is decompressed in memory: a view passing on an upstream's gzip body (a
proxy, a cache) must not make the server inflate whatever that body expands to."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
from django.http import HttpResponse
from django.test import override_settings
from django.urls import include, path

from agent_handshake.middleware import MAX_INFLATED_PAGE_BYTES

pytestmark = pytest.mark.django_db

PAGE = b"<!DOCTYPE html><html><head><title>T</title></head><body><p>x</p></body></html>"


def gzipped(body: bytes) -> HttpResponse:
    response = HttpResponse(gzip.compress(body, mtime=0), content_type="text/html; charset=utf-8")
    response["Content-Encoding"] = "gzip"
    return response


def _bomb() -> bytes:
    """A gzip page that inflates to four times the cap (a few tens of KB on the wire), compressed a block at a time
    so that making it inflates nothing either."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [deflater.compress(PAGE[:-14])]
    block = b" " * (1024 * 1024)
    parts += [deflater.compress(block) for _ in range(4 * MAX_INFLATED_PAGE_BYTES // len(block))]
    parts += [deflater.compress(b"</body></html>"), deflater.flush()]
    return b"".join(parts)


BOMB = _bomb()


def bomb(request):
    response = HttpResponse(BOMB, content_type="text/html; charset=utf-8")
    response["Content-Encoding"] = "gzip"
    return response


def small(request):
    return gzipped(PAGE)


def two_members(request):
    """A gzip stream of two members (what concatenated gzip files make): gzip.decompress reads both."""
    response = HttpResponse(gzip.compress(PAGE[:40]) + gzip.compress(PAGE[40:]), content_type="text/html")
    response["Content-Encoding"] = "gzip"
    return response


urlpatterns = [path("bomb/", bomb), path("small/", small), path("two/", two_members), path("", include("tests.urls"))]


@override_settings(ROOT_URLCONF=__name__)
def test_a_gzip_page_that_inflates_past_the_cap_is_passed_on_as_it_is(client):
    expected = BOMB
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        response = client.get("/bomb/")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.content == expected  # not rewritten: the bytes the view sent
    assert response["Link"]  # still discoverable by its header
    assert peak < 2 * MAX_INFLATED_PAGE_BYTES, peak  # the whole page was never inflated


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("url", ["/small/", "/two/"])
def test_a_gzip_page_under_the_cap_is_still_rewritten(client, url):
    response = client.get(url)
    assert response["Content-Encoding"] == "gzip"
    page = gzip.decompress(response.content)
    assert b'rel="agent-manifest"' in page
    assert b"ahp-notice" in page
