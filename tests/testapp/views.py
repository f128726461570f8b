"""Views that produce every kind of response the discovery middleware must handle."""

import asyncio
import json

from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.text import compress_string
from django.views.decorators.cache import cache_page

from agent_handshake.middleware import agent_notice_exempt

from .models import Article

PAGE = "<!DOCTYPE html>\n<html><head><title>{title}</title></head>\n<body><h1>{title}</h1>\n{body}\n</body></html>\n"


def html_page(request):
    response = HttpResponse(PAGE.format(title="Plain page", body="<p>Hello, people.</p>"))
    if "etag" in request.GET:
        response.headers["ETag"] = '"fixed-etag"'
    if "link" in request.GET:
        response.headers["Link"] = "</static/site.css>; rel=preload; as=style"
    return response


def big_page(request):
    paragraph = "<p>" + "Tea leaves unfurl slowly in water just off the boil. " * 20 + "</p>\n"
    return HttpResponse(PAGE.format(title="Big page", body=paragraph * int(request.GET.get("n", 95))))


def article(request, slug):
    item = get_object_or_404(Article, slug=slug, published=True)
    return HttpResponse(PAGE.format(title=item.title, body=item.body))


def _chunks(size):
    page = PAGE.format(title="Streamed", body="<p>" + "streamed words " * 200 + "</p>").encode()
    return [page[i : i + size] for i in range(0, len(page), size)]


def streaming_page(request):
    size = int(request.GET.get("chunk", 7))
    return StreamingHttpResponse(iter(_chunks(size)), content_type="text/html; charset=utf-8")


def async_streaming_page(request):
    size = int(request.GET.get("chunk", 7))

    async def chunks():
        for chunk in _chunks(size):
            await asyncio.sleep(0)
            yield chunk

    return StreamingHttpResponse(chunks(), content_type="text/html; charset=utf-8")


def json_view(request):
    return JsonResponse({"html": "<html><head></head><body></body></html>", "n": 1})


def pre_gzipped(request):
    response = HttpResponse(compress_string(PAGE.format(title="Zipped", body="<p>zipped</p>").encode()))
    response.headers["Content-Encoding"] = "gzip"
    response.headers["Content-Length"] = str(len(response.content))
    return response


def brotli_page(request):
    response = HttpResponse(b"\x8b\x03\x80not-really-brotli", content_type="text/html")
    response.headers["Content-Encoding"] = "br"
    return response


@agent_notice_exempt
def exempt_page(request):
    return HttpResponse(PAGE.format(title="Exempt", body="<p>no notice here</p>"))


@agent_notice_exempt
async def async_exempt_page(request):
    return HttpResponse(PAGE.format(title="Async exempt", body="<p>no notice here</p>"))


def tagged_page(request):
    return render(request, "testapp/tagged.html")


@cache_page(300)
def cached_tagged_page(request):
    return render(request, "testapp/tagged.html")


def cached_fragments_page(request):
    return render(request, "testapp/cached_fragments.html")


def fragment(request):
    return HttpResponse("<li>an htmx fragment</li>")


def no_body_tag(request):
    return HttpResponse("<!DOCTYPE html><html><head><title>t</title></head><p>no closing body tag")


def broken(request):
    raise RuntimeError("boom")


def head_only(request):
    return HttpResponse(json.dumps({"ok": True}), content_type="application/json")
