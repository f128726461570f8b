"""The demo site, loaded as `make demo` loads it: every page is discoverable and every item is in llms.txt."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from agent_handshake.models import Document
from agent_handshake.registry import content_registry
from demo_site.blog.models import Post
from demo_site.pages.models import Page
from demo_site.shop.models import Order, Product
from demo_site.videos.models import Video
from tests.ahp_schema import assert_valid_manifest

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


# --- the demo's capabilities read products named in a request's own words -----------------------------------------


def ask(client, capability, query):
    body = {"capability": capability, "query": query, "context": {"accept_types": ["application/data"]}}
    return client.post("/agent/converse", json.dumps(body), content_type="application/json").json()


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("Is the Tokoname kyusu in stock?", "Tokoname Red Clay Kyusu, 260 ml"),  # two words, one only its own
        ("is Dew of Yame still available", "Dew of Yame Gyokuro"),
        ("Is the gaiwan available?", "White Porcelain Gaiwan, 110 ml"),  # the name's last word, no other's
        ("Is the hōjicha in stock?", "Kyoto Hojicha"),  # accents
        ("Do you still have the Dong Ding Oolong, Charcoal Roasted?", "Dong Ding Oolong, Charcoal Roasted"),
    ],
)
def test_inventory_finds_a_product_named_in_part(client, demo, query, name):
    product = Product.objects.get(name=name)
    body = ask(client, "check_inventory", query)
    assert body["status"] == "success", body
    assert (body["response"]["payload"]["data"]["sku"], body["response"]["payload"]["data"]["stock"]) == (
        product.sku,
        product.stock,
    )


@pytest.mark.parametrize(
    "query",
    [
        "Do you have tea in stock?",  # "tea" names no product
        "Is the darjeeling flush in stock?",  # two Darjeelings share both words: which is not guessed
        "Do you have white tea?",  # "white" is one product's word, but not its last, and alone
        "Can Lantern & Kettle check the oolong stock?",  # the shop's name is not the Lantern or Kettle blend
    ],
)
def test_inventory_asks_when_no_one_product_is_named(client, demo, query):
    body = ask(client, "check_inventory", query)
    assert body["status"] == "clarification_needed", body
    assert "product" in body["clarification"]["question"]


def test_quote_reads_quantities_before_product_names(client, demo):
    body = ask(
        client,
        "custom_quote",
        "Could you price 4 Dew of Yame Gyokuro, 2 Takayama chasen and 3 tea caddies? "
        "Also 4 Tokoname Red Clay Kyusu, 260 ml.",
    )
    assert body["status"] == "success", body
    lines = [(line["name"], line["quantity"]) for line in body["response"]["payload"]["data"]["lines"]]
    assert lines == [
        ("Dew of Yame Gyokuro", 4),
        ("Takayama Bamboo Chasen, 80 Tines", 2),
        ("Washi-Wrapped Tea Caddy, 150 g", 3),
        ("Tokoname Red Clay Kyusu, 260 ml", 4),  # "260 ml" is part of the name, not a line of 260
    ]
    assert ask(client, "custom_quote", "How much would 20 tins cost?")["status"] == "clarification_needed"


def test_the_demo_serves_the_health_endpoint(client, demo):
    """The README's health section, wired as it says: the demo shows every check passing."""
    response = client.get("/health/?format=json")
    assert response.status_code == 200, response.content[:300]
    results = response.json()
    names = {name.split("(")[0] for name in results}
    assert names == {"VectorDatabase", "Embeddings", "IndexingBroker", "Migrations"}, results
    assert set(results.values()) == {"OK"}, results


def test_renaming_an_author_or_a_tag_rewrites_the_demo_posts_that_show_it(demo, django_capture_on_commit_callbacks):
    """The demo's posts show their author's name and their tags (``PostContent.get_markdown``): its config follows
    both, so an editor renaming either sees the posts' agent documents follow."""
    post = Post.published.filter(tags__isnull=False).select_related("author").first()
    author, tag = post.author, post.tags.first()
    with django_capture_on_commit_callbacks(execute=True):
        author.name = "Renamed Author"
        author.save()
        tag.name = "renamed-tag"
        tag.save()
    markdown = Document.objects.get(url=post.get_absolute_url()).markdown
    assert "By Renamed Author" in markdown
    assert "renamed-tag" in markdown
