"""The demo site, loaded as `make demo` loads it: every page is discoverable and every item is in llms.txt."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agent_handshake.models import Document
from agent_handshake.registry import content_registry
from demo_site.blog.models import Post
from demo_site.pages.models import Page
from demo_site.shop.models import Order, Product
from demo_site.videos.models import Video
from tests.ahp import assert_valid_manifest

pytestmark = pytest.mark.django_db

DEMO_LABELS = ("blog.post", "pages.page", "videos.video", "shop.product")


@pytest.fixture
def demo(settings, demo_content):
    settings.ROOT_URLCONF = "demo_site.urls"


def test_demo_load_command(demo):
    out = StringIO()
    call_command("demo_load", stdout=out)  # idempotent over the loaded content; adds the profile and admin
    assert "Installed" in out.getvalue()
    assert "Created the agent site profile." in out.getvalue()


def test_demo_content_is_substantial(demo):
    items = Post.published.count() + Page.objects.count() + Video.objects.count() + Product.objects.count()
    assert items >= 60
    assert Order.objects.exists()
    registered = sum(content_registry.get_config_by_label(label).get_queryset().count() for label in DEMO_LABELS)
    demo_documents = Document.objects.filter(content_type__app_label__in=["blog", "pages", "videos", "shop"])
    assert demo_documents.count() == registered


def test_every_demo_page_is_discoverable(client, demo):
    urls = ["/", "/blog/", "/videos/", "/shop/", *Document.objects.values_list("url", flat=True)]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert html.count('rel="agent-manifest"') == 1, url
        assert html.count('aria-label="AI Agent Notice"') == 1, url
        assert html.index('rel="agent-manifest"') < html.index("</head>"), url
        assert "agent-manifest" in response["Link"]


def test_demo_manifest_and_llms_txt(client, demo, ahp_schemas):
    manifest = client.get("/.well-known/agent.json").json()
    assert_valid_manifest(manifest, ahp_schemas)
    names = {capability["name"] for capability in manifest["capabilities"]}
    assert {"site_info", "content_search", "get_video", "get_product"} <= names
    llms = client.get("/llms.txt").content.decode()
    for title in Document.objects.values_list("title", flat=True):
        assert f"[{title}]" in llms
    draft = Post.objects.exclude(status=Post.Status.PUBLISHED).first()
    assert draft is not None
    assert draft.title not in llms


def test_demo_markdown_versions(client, demo):
    video = Video.objects.first()
    text = client.get(video.get_absolute_url().rstrip("/") + ".md").content.decode()
    assert text.startswith(f"# {video.title}\n")
    assert "Type: VideoObject" in text
    product = Product.objects.filter(is_active=True).first()
    text = client.get(product.get_absolute_url(), headers={"Accept": "text/markdown"}).content.decode()
    assert f"SKU {product.sku}" in text
