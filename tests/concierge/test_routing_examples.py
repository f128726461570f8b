"""The site's routing examples (the admin's "Routing examples"): requests an operator adds to teach the router which
capability is meant, on the demo content, with the real embedding model, PostgreSQL and HTTP."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from agent_handshake.concierge import routing
from agent_handshake.models import RoutingExample
from agent_handshake.registry import capability_registry
from tests.fuzzing import DEMO_CAPABILITIES

pytestmark = pytest.mark.django_db

#: Its capabilities' own texts send this stock question to the content (the product's page answers it); measured
#: in each test that relies on it, so the test fails if that changes rather than passing for the wrong reason.
STOCK_QUESTION = "r u out of the dew of yame gyokuro"


@pytest.fixture(autouse=True)
def forget_examples():
    # The tests' transactions are rolled back without running on_commit: nothing read in one test may outlive it.
    routing.forget_site_examples()
    yield
    routing.forget_site_examples()


def ask(client, query):
    response = client.post(
        "/agent/converse", data=json.dumps({"ahp": "0.1", "query": query}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def used(client, query) -> str:
    body = ask(client, query)
    assert "meta" in body, body
    return body["meta"]["capability_used"]


def test_an_example_teaches_the_router_and_deleting_it_unteaches(
    client, demo_content, django_capture_on_commit_callbacks
):
    assert used(client, STOCK_QUESTION) == "content_search"
    with django_capture_on_commit_callbacks(execute=True):
        example = RoutingExample.objects.create(capability="check_inventory", text=STOCK_QUESTION)
    body = ask(client, STOCK_QUESTION)
    assert body.get("meta", {}).get("capability_used") == "check_inventory", body
    assert "Dew of Yame" in body["response"]["answer"], body  # the stock check ran on the product the request names
    with django_capture_on_commit_callbacks(execute=True):
        example.delete()
    assert used(client, STOCK_QUESTION) == "content_search"


def test_an_example_fits_requests_like_it_not_only_itself(demo_content, django_capture_on_commit_callbacks):
    capabilities = [c for c in capability_registry.available() if c.handler]
    inventory = next(c for c in capabilities if c.name == "check_inventory")

    def fit(text: str) -> float:
        return next(item.score for item in routing.rank(text, capabilities) if item.capability is inventory)

    asked = "any left on the shelf, or all gone?"
    before = fit(asked)
    with django_capture_on_commit_callbacks(execute=True):
        RoutingExample.objects.create(
            capability="check_inventory", text="got some left on your shelves or is it all gone"
        )
    assert fit(asked) > before + 0.05


def test_filing_an_example_computes_that_text_alone(client, demo_content, django_capture_on_commit_callbacks):
    """A capability's matrix of vectors is keyed by all its texts, so one example filed changes its key; the texts
    the process computed before are not computed again (an operator's edit costs one text's run, not two hundred)."""
    from tests.concierge.test_routing import CountingEmbeddings

    inventory = capability_registry.get("check_inventory")
    with override_settings(
        AGENT_HANDSHAKE={
            **settings.AGENT_HANDSHAKE,
            "EMBEDDING_BACKEND": "tests.concierge.test_routing.CountingEmbeddings",
        }
    ):
        CountingEmbeddings.computed = []
        assert used(client, "Is LK-TEA-0001 in stock?") == "check_inventory"
        assert inventory.description in CountingEmbeddings.computed  # measured: computed on the first request
        CountingEmbeddings.computed = []
        with django_capture_on_commit_callbacks(execute=True):
            RoutingExample.objects.create(capability="check_inventory", text="do you still have any smoky black tea")
        assert used(client, "Is LK-TEA-0002 in stock?") == "check_inventory"
        computed = CountingEmbeddings.computed
        assert [text for text in computed if "smoky" in text] == ["do you still have any smoky black tea"], computed
        assert inventory.description not in computed
        assert not set(routing.declared_texts(inventory)) & set(computed)

        # Deleted, the capability's texts are fewer: all of them were computed before, so nothing is.
        CountingEmbeddings.computed = []
        with django_capture_on_commit_callbacks(execute=True):
            RoutingExample.objects.filter(text__contains="smoky").delete()
        assert used(client, "Is LK-TEA-0003 in stock?") == "check_inventory"
        assert CountingEmbeddings.computed == ["Is LK-TEA-0003 in stock?"]


def test_a_cache_entry_of_another_shape_is_computed_again_not_an_error(client, demo_content):
    """An entry under a capability's key that is not what this version writes (another version's format, another
    writer) is taken as missing: routing works, and the entry is written again."""
    from django.core.cache import caches

    from agent_handshake.retrieval.embeddings import get_embedding_backend

    slot = routing.vectors_key(get_embedding_backend(), "check_inventory")
    for odd in ("not vectors", ("key", ("a text",)), ("key", ("a text",), [[0.0]]), (1, 2, 3)):
        caches["default"].set(slot, odd, timeout=None)
        assert used(client, "Is LK-TEA-0001 in stock?") == "check_inventory"
        _, texts, matrix = caches["default"].get(slot)
        assert matrix.shape == (len(texts), get_embedding_backend().dimensions)


@override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "STATE_TTL": 3600})
def test_another_processs_example_is_read_after_state_ttl(client, demo_content):
    assert used(client, STOCK_QUESTION) == "content_search"
    # Written without this process's signals, as another process's save (or a SQL shell) would be.
    RoutingExample.objects.bulk_create([RoutingExample(capability="check_inventory", text=STOCK_QUESTION)])
    assert used(client, STOCK_QUESTION) == "content_search"  # within STATE_TTL: the examples read before
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "STATE_TTL": 0}):
        assert used(client, STOCK_QUESTION) == "check_inventory"


def test_each_capability_routes_by_its_newest_examples_up_to_the_limit(demo_content):
    limit = routing.SITE_EXAMPLES_PER_CAPABILITY
    RoutingExample.objects.bulk_create(
        [RoutingExample(capability="check_inventory", text=f"is teapot number {n} in stock") for n in range(limit + 1)]
        + [RoutingExample(capability="order_status", text="where is my parcel")]
    )
    examples = routing.site_examples()
    assert examples["order_status"] == ("where is my parcel",)
    kept = examples["check_inventory"]
    assert len(kept) == limit
    assert kept[0] == "is teapot number 1 in stock"  # the oldest one is left out, the rest in the order added
    assert kept[-1] == f"is teapot number {limit} in stock"
    inventory = capability_registry.get("check_inventory")
    assert routing.texts_of(inventory)[-limit:] == list(kept)


def test_an_example_of_a_capability_that_is_gone_is_kept_and_not_used(client, demo_content):
    capabilities = list(capability_registry)
    before = [routing.texts_of(capability) for capability in capabilities]
    RoutingExample.objects.create(capability="retired_capability", text=STOCK_QUESTION)
    routing.forget_site_examples()
    assert routing.site_examples() == {"retired_capability": (STOCK_QUESTION,)}
    assert [routing.texts_of(capability) for capability in capabilities] == before
    assert used(client, STOCK_QUESTION) == "content_search"
    assert RoutingExample.objects.filter(capability="retired_capability").exists()


def test_examples_change_neither_the_sites_name_rule_nor_the_cue_words(demo_content):
    """Examples are requests: they name the site as requests do ("what is lantern and kettle") and share words
    across capabilities; read as capability texts they made the name a word the capabilities use (so it counted
    for them again) and took cue words away from the others."""
    from agent_handshake import state
    from agent_handshake.models import SiteProfile

    SiteProfile.objects.update_or_create(pk=1, defaults={"name": "Lantern & Kettle"})
    state.invalidate()
    capabilities = [c for c in capability_registry.available() if c.handler]
    pattern = routing.name_pattern(capabilities)
    assert pattern is not None
    declared = tuple(tuple(routing.declared_texts(c)) for c in capabilities)
    cues = routing.cues(declared)
    call_command("loaddata", "demo_routing_examples", verbosity=0)
    routing.forget_site_examples()
    assert any("lantern and kettle" in text.lower() for texts in routing.site_examples().values() for text in texts)
    assert routing.name_pattern(capabilities) == pattern
    assert routing.without_site_name("Who runs Lantern and Kettle?", routing.name_pattern(capabilities)) == (
        "Who runs you?"
    )
    assert routing.cues(tuple(tuple(routing.declared_texts(c)) for c in capabilities)) == cues
    ranked = {item.capability.name for item in routing.rank("Can I book a tasting for Saturday?", capabilities)}
    assert "book_appointment" in ranked


def test_an_example_is_stored_without_the_spaces_around_it_however_it_is_added(demo_content):
    RoutingExample.objects.create(capability="check_inventory", text="  any kettles left?\n")
    assert RoutingExample.objects.get().text == "any kettles left?"


def test_the_sites_examples_are_not_published(client, demo_content):
    """They may be copied from agents' requests: the documents list what the capabilities declare, nothing more."""
    marker = "zhuni teapot stock question from the routing examples"
    RoutingExample.objects.create(capability="check_inventory", text=marker)
    routing.forget_site_examples()
    for url in ("/.well-known/agent.json", "/intentmanifest.yaml", "/openapi.json", "/llms.txt"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert marker not in response.content.decode(), url
    tools = client.post(
        "/mcp",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_MCP_PROTOCOL_VERSION="2025-06-18",
    )
    assert tools.status_code == 200, tools.content
    assert marker not in tools.content.decode()


def test_loading_the_demo_examples_again_adds_none(demo_content):
    call_command("loaddata", "demo_routing_examples", verbosity=0)
    count = RoutingExample.objects.count()
    assert count >= 300
    call_command("loaddata", "demo_routing_examples", verbosity=0)  # natural keys: the same rows, updated
    assert RoutingExample.objects.count() == count
    assert set(RoutingExample.objects.values_list("capability", flat=True)) == {*DEMO_CAPABILITIES, "escalate_to_human"}


def test_the_admin_offers_the_registered_capabilities_and_keeps_the_request_as_written(admin_client, demo_content):
    add = reverse("admin:agent_handshake_routingexample_add")
    page = admin_client.get(add)
    assert page.status_code == 200
    choices = [value for value, _ in page.context["adminform"].form.fields["capability"].choices]
    assert {"check_inventory", "site_info", "escalate_to_human"} <= set(choices)
    refused = admin_client.post(add, {"capability": "no_such_capability", "text": "hello there"})
    assert refused.status_code == 200
    assert "capability" in refused.context["adminform"].form.errors
    blank = admin_client.post(add, {"capability": "check_inventory", "text": "   "})
    assert "text" in blank.context["adminform"].form.errors
    saved = admin_client.post(add, {"capability": "check_inventory", "text": "  any zhuni pots left?\n", "note": ""})
    assert saved.status_code == 302
    assert RoutingExample.objects.get().text == "any zhuni pots left?"
    duplicate = admin_client.post(add, {"capability": "check_inventory", "text": "any zhuni pots left?"})
    assert duplicate.status_code == 200  # the unique constraint, as a form error, not a 500
    assert RoutingExample.objects.count() == 1


def test_the_admin_shows_an_example_whose_capability_is_gone(admin_client, demo_content):
    example = RoutingExample.objects.create(capability="retired_capability", text="an old request")
    listed = admin_client.get(reverse("admin:agent_handshake_routingexample_changelist"))
    assert listed.status_code == 200
    assert "an old request" in listed.content.decode()
    change = admin_client.get(reverse("admin:agent_handshake_routingexample_change", args=[example.pk]))
    choices = dict(change.context["adminform"].form.fields["capability"].choices)
    assert choices["retired_capability"] == "retired_capability (no longer registered)"
    moved = admin_client.post(
        reverse("admin:agent_handshake_routingexample_change", args=[example.pk]),
        {"capability": "check_inventory", "text": "an old request", "note": "moved"},
    )
    assert moved.status_code == 302
    example.refresh_from_db()
    assert example.capability == "check_inventory"


# --- The names of the objects actions act on -------------------------------------------------------------------


def test_the_products_names_are_the_objects_of_actions(demo_content):
    names = routing.object_names()
    assert ("yame", "gyokuro") in names.pairs  # "Dew of Yame Gyokuro", a product: check_inventory acts on products
    assert ("kyoto", "hojicha") in names.pairs
    assert ("dew", "of") not in names.pairs  # a stop word
    assert not any(word.isdigit() for pair in names.pairs for word in pair)  # "2019 Menghai ...", "120 ml": no numbers
    assert routing.without_object_names("How many Kyoto Hojicha tins do you have left?", names) == (
        "How many it tins do you have left?"
    )
    # A run of named words is one object; accents and case do not matter; other words stay as written.
    assert routing.without_object_names("Is DEW OF YAME GYOKURO in stock, and the Uji Cérémonial kit?", names) == (
        "Is DEW OF it in stock, and the it kit?"
    )
    assert routing.without_object_names("How hot should the water be for gyokuro?", names) == (
        "How hot should the water be for gyokuro?"  # one word of a name is not the name
    )


def test_a_pair_a_capability_declares_is_not_an_objects_name(demo_content):
    from django.contrib.contenttypes.models import ContentType

    from agent_handshake import state
    from agent_handshake.models import Document
    from demo_site.shop.models import Product

    # A product whose name holds the words the booking's description says ("Book a tea tasting ..."): leaving them
    # out of "book a tea tasting" would hide what is asked. And a title made of words every request uses: pairs with
    # a stop word name nothing.
    for slug, title in (("tasting-kit", "Home Tea Tasting Kit"), ("mind", "Where Is My Mind")):
        Document.objects.create(
            content_type=ContentType.objects.get_for_model(Product),
            object_id=slug,
            url=f"/shop/{slug}/",
            path=f"/shop/{slug}/",
            title=title,
            content_hash="x",
        )
    state.invalidate()  # as another process sees it after STATE_TTL
    names = routing.object_names()
    assert ("home", "tea") in names.pairs
    assert ("tea", "tasting") not in names.pairs
    assert ("my", "mind") not in names.pairs
    assert routing.without_object_names("where is my order LK-10001", names) == "where is my order LK-10001"
    assert routing.without_object_names("I'd like to book a tea tasting on Friday", names) == (
        "I'd like to book a tea tasting on Friday"
    )


def test_a_product_named_by_one_capabilitys_examples_draws_no_request_about_it(
    demo_content, django_capture_on_commit_callbacks
):
    """Examples that name a product are about the action, not the product: a stock question about the product a
    few quote examples name still goes to the stock check."""
    stock = "Do you have any Kyoto Hojicha left in stock?"
    with django_capture_on_commit_callbacks(execute=True):
        RoutingExample.objects.bulk_create(
            [
                RoutingExample(capability="custom_quote", text=text)
                for text in (
                    "Quote for 12 Kyoto Hojicha, please.",
                    "What would 30 Kyoto Hojicha cost with shipping?",
                    "Price 8 Kyoto Hojicha for me",
                )
            ]
        )
        routing.forget_site_examples()
    from agent_handshake.concierge.turns import answering_capabilities, route_text

    chosen = route_text(stock, answering_capabilities()).chosen
    assert chosen is not None
    assert chosen.name == "check_inventory", chosen


def test_an_operator_files_a_request_from_the_agent_traffic_page(client, demo_content, settings):
    """The agent traffic page links each recorded question to the *Routing examples* form, filled in with it (the
    operator chooses the capability and saves); once filed, the page says so instead. Not for a viewer who may not
    add routing examples."""
    import html
    import re
    from urllib.parse import urlencode

    from django.contrib.auth.models import Permission
    from django.utils import timezone

    from agent_handshake.insights import recording
    from agent_handshake.models import AgentRequest
    from tests.insights.test_admin_pages import staff

    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INSIGHTS_RECORD_QUESTIONS": True}
    recording.discard()
    body = {"ahp": "0.1", "query": STOCK_QUESTION, "context": {"requesting_agent": "TeaBot"}}
    assert client.post("/agent/converse", data=json.dumps(body), content_type="application/json").status_code == 200
    recording.flush()
    row = AgentRequest.objects.get()
    assert row.question == STOCK_QUESTION
    page_url = reverse("admin:agent_handshake_insights_agent") + "?" + urlencode({"agent": row.agent})

    client.force_login(staff("viewer", insights=True))
    assert (
        "file as a routing example" not in client.get(page_url).content.decode()
    )  # may view the traffic, may not add examples

    owner = staff("owner", insights=True)
    owner.user_permissions.add(Permission.objects.get(codename="add_routingexample"))
    client.force_login(owner)
    page = client.get(page_url).content.decode()
    (link,) = re.findall(r'<a class="routing-example" href="([^"]+)"', page)
    form = client.get(html.unescape(link))
    assert form.status_code == 200
    initial = form.context["adminform"].form.initial
    assert initial["text"] == STOCK_QUESTION
    assert initial["note"] == f"From the agent traffic of {row.agent}, {timezone.localdate(row.at):%Y-%m-%d}"
    saved = client.post(
        html.unescape(link), {"text": initial["text"], "capability": "check_inventory", "note": initial["note"]}
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert RoutingExample.objects.get(text=STOCK_QUESTION).capability == "check_inventory"
    page = client.get(page_url).content.decode()
    assert "(a routing example for check_inventory)" in page
    assert "file as a routing example" not in page

    # An agent's name as long as the column allows: the note keeps the day, within its 200 characters.
    long_name = "did:web:" + "a" * 192
    AgentRequest.objects.create(
        at=row.at, protocol="ahp", outcome=row.outcome, status=200, latency_ms=5, agent_kind=row.agent_kind,
        agent=long_name, question="any kettles left?",
    )  # fmt: skip
    page = client.get(reverse("admin:agent_handshake_insights_agent") + "?" + urlencode({"agent": long_name}))
    (link,) = re.findall(r'<a class="routing-example" href="([^"]+)"', page.content.decode())
    note = client.get(html.unescape(link)).context["adminform"].form.initial["note"]
    assert len(note) == 200
    assert note.startswith("From the agent traffic of did:web:aaa")
    assert note.endswith(f"…, {timezone.localdate(row.at):%Y-%m-%d}")
