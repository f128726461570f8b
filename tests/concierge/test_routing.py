"""Semantic routing on POST /agent/converse: requests that name no capability, on the demo content, with the real
embedding model and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest
from django.conf import settings
from django.core.cache import caches
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from agent_handshake import state
from agent_handshake.concierge import routing
from agent_handshake.concierge.routing import masking, site_topic
from agent_handshake.conf import app_settings
from agent_handshake.models import Document, EmbeddingIndex, Passage
from agent_handshake.registry import Capability, capability_registry
from agent_handshake.retrieval import embeddings
from agent_handshake.retrieval.embeddings import MiniLMEmbeddings, get_embedding_backend
from agent_handshake.retrieval.index import passages_mean
from tests.hnsw import random_passages

pytestmark = pytest.mark.django_db

URL = "/agent/converse"
CONTENT_QUESTION = "How hot should the water be for gyokuro?"
STOCK_REQUEST = "Is LK-TEA-0001 in stock?"


class EmbedCalls(MiniLMEmbeddings):
    """The default model, recording each call to embed (the texts of one call together)."""

    calls: list[list[str]] = []

    def embed(self, texts):
        type(self).calls.append(list(texts))
        return super().embed(texts)


class CountingEmbeddings(MiniLMEmbeddings):
    """The default model, counting the texts it computes (the EMBEDDING_BACKEND of the caching tests)."""

    computed: list[str] = []

    def compute(self, texts):
        type(self).computed.extend(texts)
        return super().compute(texts)


def converse(client, body):
    response = client.post(URL, data=json.dumps(body), content_type="application/json")
    assert response["Content-Type"] == "application/json"
    return response, response.json()


def ask(client, query, **fields):
    return converse(client, {"ahp": "0.1", "query": query, **fields})


def vector_of(text: str) -> list[float]:
    # Six decimals: 384 numbers then fit the 8 KB body cap with room to spare.
    return [round(float(x), 6) for x in get_embedding_backend().embed([text])[0]]


def test_a_question_about_the_content_is_answered_by_content_search(client, demo_content):
    # Its texts alone send it to a MODE3 capability (whose examples name the shop's gyokuro): measured here so
    # the test fails if the content's fit stops counting.
    ranked = routing.rank(CONTENT_QUESTION, [c for c in capability_registry.available() if c.handler])
    assert ranked[0].capability.action_type is not None
    response, body = ask(client, CONTENT_QUESTION)
    assert response.status_code == 200, body
    assert body["status"] == "success"
    assert body["meta"]["capability_used"] == "content_search"
    assert body["meta"]["mode"] == "MODE2"
    sources = body["response"]["sources"]
    assert any("gyokuro" in (source["title"] + source["url"]).lower() for source in sources), sources


def test_an_action_request_is_routed_to_its_capability(client, demo_content):
    response, body = ask(client, STOCK_REQUEST)
    assert response.status_code == 200, body
    assert body["status"] == "success"
    assert body["meta"]["capability_used"] == "check_inventory"
    assert body["meta"]["mode"] == "MODE3"
    assert "Dew of Yame" in body["response"]["answer"], body


def test_a_named_capability_is_still_used_as_named(client, demo_content):
    response, body = ask(client, STOCK_REQUEST, capability="content_search")
    assert response.status_code == 200, body
    assert body["meta"]["capability_used"] == "content_search"


def test_close_candidates_get_a_clarification_and_the_next_turn_chooses(client, demo_content):
    tied = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every candidate is "close": a tie
    with override_settings(AGENT_HANDSHAKE=tied):
        response, body = ask(client, STOCK_REQUEST)
        assert response.status_code == 200, body
        assert body["status"] == "clarification_needed"
        clarification = body["clarification"]
        assert clarification["free_form"] is True
        assert "check_inventory" in clarification["options"]
        assert 2 <= len(clarification["options"]) <= 4
        assert "check_inventory" in clarification["question"]
        session_id = body["session_id"]

        response, body = ask(client, STOCK_REQUEST, session_id=session_id, clarification="check_inventory")
        assert response.status_code == 200, body
        assert body["status"] == "success"
        assert body["meta"]["capability_used"] == "check_inventory"

        # The session keeps its capability: a follow-up without one continues it.
        response, body = ask(client, "Is LK-TEA-0004 in stock?", session_id=session_id)
        assert body["meta"]["capability_used"] == "check_inventory", body

        # A choice by number, in a new clarification.
        response, body = ask(client, STOCK_REQUEST)
        assert body["clarification"]["options"][0] == "check_inventory", body
        response, body = ask(client, STOCK_REQUEST, session_id=body["session_id"], clarification="the first")
        assert body["meta"]["capability_used"] == "check_inventory", body


def offered_clarification(client):
    """A routing clarification for STOCK_REQUEST (every candidate close): its session id, its options, and the
    number of an option after the first that answers without credentials or input (site_info)."""
    tied = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}
    with override_settings(AGENT_HANDSHAKE=tied):
        _, body = ask(client, STOCK_REQUEST)
    assert body["status"] == "clarification_needed", body
    options = body["clarification"]["options"]
    assert options.index("site_info") >= 1, options
    return body["session_id"], options, options.index("site_info") + 1


def test_a_numbered_choice_is_the_option_of_the_list_offered_after_another_option_is_gone(
    client, demo_content, registries
):
    # The numbers count the options as offered: one withdrawn since then must not shift the others.
    session_id, options, number = offered_clarification(client)
    registries[1].unregister(options[0])
    response, body = ask(client, STOCK_REQUEST, session_id=session_id, clarification=str(number))
    assert response.status_code == 200, body
    assert body["meta"]["capability_used"] == "site_info", body


@pytest.mark.parametrize("choice", ["the first", "1", "name"])
def test_choosing_an_option_withdrawn_since_it_was_offered_is_an_unknown_capability(
    client, demo_content, registries, choice
):
    session_id, options, number = offered_clarification(client)
    registries[1].unregister(options[0])
    clarification = options[0] if choice == "name" else choice
    response, body = ask(client, STOCK_REQUEST, session_id=session_id, clarification=clarification)
    assert response.status_code == 400, body
    assert body["code"] == "unknown_capability", body
    assert options[0] in body["message"], body
    assert options[0] not in body["available_capabilities"], body
    # The clarification is still open: an option still offered is chosen by its number on the list offered.
    response, body = ask(client, STOCK_REQUEST, session_id=session_id, clarification=str(number))
    assert response.status_code == 200, body
    assert body["meta"]["capability_used"] == "site_info", body


def test_a_free_form_answer_after_an_option_was_withdrawn_is_an_unknown_capability(client, demo_content, registries):
    # It may have meant the withdrawn one (ranked among the others, it would get a capability it did not mean).
    session_id, options, _ = offered_clarification(client)
    registries[1].unregister(options[1])
    response, body = ask(client, STOCK_REQUEST, session_id=session_id, clarification="whichever checks the shelf")
    assert response.status_code == 400, body
    assert body["code"] == "unknown_capability", body
    assert options[1] in body["message"], body


def test_a_clarification_in_someone_elses_session_is_refused(client, demo_content):
    tied = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}
    with override_settings(AGENT_HANDSHAKE=tied):
        _, body = ask(client, STOCK_REQUEST)
        response = client.post(
            URL,
            data=json.dumps({"query": STOCK_REQUEST, "session_id": body["session_id"], "clarification": "1"}),
            content_type="application/json",
            REMOTE_ADDR="203.0.113.9",
        )
        assert response.status_code == 404, response.json()


def test_an_intent_vector_is_used_instead_of_the_query(client, demo_content):
    site_info = capability_registry.get("site_info")
    vector = vector_of(site_info.description)
    response, body = ask(client, STOCK_REQUEST, context={"intent_vector": vector})
    assert response.status_code == 200, body
    assert body["meta"]["capability_used"] == "site_info"
    # Normalised before use: a scaled copy routes the same way.
    response, body = ask(client, STOCK_REQUEST, context={"intent_vector": [round(3 * x, 6) for x in vector]})
    assert body["meta"]["capability_used"] == "site_info", body


@pytest.mark.parametrize(
    "vector",
    [
        [0.1, 0.2, 0.3],  # not the model's 384 dimensions
        ["0.1"] * 384,
        [True] * 384,
        [0.0] * 384,
        "0.1, 0.2",
        [],
    ],
)
def test_a_malformed_intent_vector_is_a_400_naming_it(client, demo_content, vector):
    response, body = ask(client, STOCK_REQUEST, context={"intent_vector": vector})
    assert response.status_code == 400, body
    assert body["status"] == "error"
    assert body["fields"] == ["context.intent_vector"], body


@pytest.mark.parametrize("scale", [1e20, 1e39, 1e-25])
def test_an_intent_vector_too_long_or_too_short_to_normalise_is_a_400_saying_so(client, demo_content, scale):
    # Finite numbers, not all zero, whose length overflows (or underflows) a 32-bit float: the message said "must
    # not be all zeros", which is not what is wrong with them.
    response, body = ask(client, STOCK_REQUEST, context={"intent_vector": [scale] * 384})
    assert response.status_code == 400, body
    assert body["fields"] == ["context.intent_vector"], body
    assert "normalised" in body["message"], body
    assert "zeros" not in body["message"], body


def test_description_embeddings_are_computed_once_and_kept_in_the_cache(client, demo_content):
    counting = {**settings.AGENT_HANDSHAKE, "EMBEDDING_BACKEND": "tests.concierge.test_routing.CountingEmbeddings"}
    description = capability_registry.get("check_inventory").description
    CountingEmbeddings.computed = []
    with override_settings(AGENT_HANDSHAKE=counting):
        assert ask(client, STOCK_REQUEST)[1]["meta"]["capability_used"] == "check_inventory"
        assert CountingEmbeddings.computed.count(description) == 1
        slot = routing.vectors_key(get_embedding_backend(), "check_inventory")
        _, texts, matrix = caches["default"].get(slot)  # the texts' key, the texts, a row for each
        assert description in texts
        assert matrix.shape == (len(texts), get_embedding_backend().dimensions)

        # Another request, in a "new process" (the embedding LRU emptied): read from the cache, not computed.
        with embeddings._caches_lock:
            embeddings._caches.clear()
        assert ask(client, "Is LK-TEA-0002 in stock?")[1]["meta"]["capability_used"] == "check_inventory"
        assert CountingEmbeddings.computed.count(description) == 1

        # An emptied cache (a deployment whose cache was flushed) computes them again.
        caches["default"].clear()
        ask(client, STOCK_REQUEST)
        assert CountingEmbeddings.computed.count(description) == 2


def test_the_cache_key_follows_the_texts_and_the_model():
    backend = get_embedding_backend()
    key = routing.cache_key(backend, ["Check stock", "Whether a product is in stock."])
    assert key == routing.cache_key(backend, ["Check stock", "Whether a product is in stock."])
    assert key != routing.cache_key(backend, ["Check stock", "Whether a product is in stock today."])

    class OtherModel(MiniLMEmbeddings):
        model_id = "other/model"

    assert key != routing.cache_key(OtherModel(), ["Check stock", "Whether a product is in stock."])


# A stock question naming a product, not a SKU: the product's own page ("N in stock") fits it better than the
# capability's texts do, so it went to content_search while the product's page counted against the stock check.
NAMED_STOCK_REQUEST = "Have you run out of the Shou Pu-erh mini tuos?"


def test_the_content_an_action_applies_to_does_not_count_against_it(demo_content):
    capabilities = [c for c in capability_registry.available() if c.handler]
    inventory = capability_registry.get("check_inventory")
    default = capability_registry.get("content_search")
    vector = routing.embed_query(NAMED_STOCK_REQUEST)
    ranked = routing.rank(NAMED_STOCK_REQUEST, capabilities)
    score = next(s.against_content for s in ranked if s.capability is inventory)
    margin = settings.AGENT_HANDSHAKE.get("ROUTING_CONTENT_MARGIN", 0.1)
    # Against all the content (the product page included) it would not compete; against the rest it does.
    assert score < routing.content_fit(vector, default) - margin
    assert score >= routing.content_fit(vector, default, excluding=tuple(inventory.applies_to)) - margin
    assert routing.route(NAMED_STOCK_REQUEST, capabilities, vector=vector, default=default).chosen is inventory


def test_cue_words_are_the_words_only_one_capability_declares():
    texts = (("Check stock", "Whether a product is in stock."), ("Track an order", "The status of a product's order."))
    stock, order = routing.cues(texts)
    assert {"check", "stock"} <= stock  # their first CUE_PREFIX letters
    assert {"track", "order", "statu"} <= order
    assert "produ" not in stock | order  # both declare "product": a cue of neither
    assert routing.words("Booking 12 tasting sessions") == {"booki", "tasti", "sessi"}  # no numbers


def test_a_cue_word_in_the_request_adds_the_cue_weight(demo_content):
    capabilities = [c for c in capability_registry.available() if c.handler]
    request = "Anything left in stock?"
    assert (
        "stock"
        in routing.cues(tuple(tuple(routing.texts_of(c)) for c in capabilities))[
            capabilities.index(capability_registry.get("check_inventory"))
        ]
    )
    scores = {}
    for weight in (0.0, 0.05):
        with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "ROUTING_CUE_WEIGHT": weight}):
            scores[weight] = {s.capability.name: s.score for s in routing.rank(request, capabilities)}
    assert scores[0.05]["check_inventory"] == pytest.approx(scores[0.0]["check_inventory"] + 0.05, abs=1e-6)
    assert scores[0.05]["site_info"] == pytest.approx(scores[0.0]["site_info"], abs=1e-6)  # no cue of its own


def test_the_built_in_answering_capabilities_have_examples_that_route(demo_content):
    # site_info (contact is offered only once the site profile has contact details, which the test profile lacks).
    query, capability = "What kind of organisation is this?", capability_registry.get("site_info")
    assert capability.examples
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    assert routing.route(query, capabilities, default=default).chosen is capability
    # Its examples fit such requests better than its intent and description alone.
    bare = [dataclasses.replace(c, examples=()) if c is capability else c for c in capabilities]
    with_examples = next(s.score for s in routing.rank(query, capabilities) if s.capability is capability)
    without = next(s.score for s in routing.rank(query, bare) if s.capability.name == capability.name)
    assert with_examples > without + 0.1


def test_a_capability_fits_by_the_mean_of_its_nearest_texts():
    similarities = np.array([0.9, 0.1, 0.5], dtype=np.float32)
    for nearest, expected in ((1, 0.9), (2, 0.7), (3, 0.5), (5, 0.5)):
        with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "ROUTING_NEAREST": nearest}):
            assert routing.nearest_mean(similarities) == pytest.approx(expected)


def test_rank_scores_a_capability_by_its_two_nearest_texts(demo_content):
    # A capability with many examples no longer wins on its one closest text: the second must agree.
    capabilities = [c for c in capability_registry.available() if c.handler]
    request = "Is the bamboo whisk sold out?"
    vector = routing.embed_query(request)
    matrices = routing.described(capabilities)
    off = {**settings.AGENT_HANDSHAKE, "ROUTING_CUE_WEIGHT": 0.0}
    with override_settings(AGENT_HANDSHAKE=off):
        ranked = {s.capability.name: s for s in routing.rank(request, capabilities)}
    direction = routing.topic()
    assert direction is not None
    for capability, matrix in zip(capabilities, matrices, strict=True):
        best_two = np.sort(matrix @ vector)[-2:]
        assert ranked[capability.name].against_content == pytest.approx(float(best_two.mean()), abs=1e-5)
        # Chosen by the same with the site's topic left out of the request and of the texts.
        best_two = np.sort(routing.off_topic(matrix, direction) @ routing.off_topic(vector, direction))[-2:]
        assert ranked[capability.name].score == pytest.approx(float(best_two.mean()), abs=1e-5)


def test_the_site_name_is_found_however_it_is_written():
    pattern = routing.site_name_pattern("Lantern & Kettle")
    for text in ("Who runs Lantern & Kettle?", "what is lantern and kettle", "LANTERN-KETTLE news"):
        assert pattern.sub("you", text) != text
    assert pattern.sub("you", "a lantern for the kettle") == "a lantern for the kettle"
    assert routing.site_name_pattern("  ") is None


def test_the_site_name_is_found_without_its_accents():
    pattern = routing.site_name_pattern("Café Noir")
    for text in ("Who runs cafe noir?", "CAFÉ NOIR opening times", "Is Cafe\u0301 Noir open?"):
        assert routing.without_site_name(text, pattern).replace("you", "").lower().find("noir") < 0, text
    assert routing.without_site_name("Is Cafe\u0301 Noir open?", pattern) == "Is you open?"
    assert routing.without_site_name("Un café noir, s'il vous plaît", pattern) == "Un you, s'il vous plaît"


def test_finding_the_site_name_takes_linear_time_on_a_hostile_request():
    # "\W+(?:(?:and|&)\W+)?" between the words backtracked quadratically on a run of " &" (0.58 s on 4,000).
    pattern = routing.site_name_pattern("Lantern & Kettle")
    for hostile in ("Lantern" + " &" * 4100, "Lantern" + " and" * 2100, "Lantern &" * 910, "Lantern é" + " &" * 4100):
        hostile = hostile[:8192]
        started = time.perf_counter()
        assert routing.without_site_name(hostile, pattern) == hostile
        assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize("name", ["Tea", "The Shop", "A", "Kettle"])
def test_a_site_name_of_common_words_is_left_as_written(demo_content, monkeypatch, name):
    # Replaced, "Do you sell tea?" would be "Do you sell you?" for a site called "Tea", "Is the shop open?" "Is you
    # open?" for "The Shop", and every "a" would be "you": the name carries no word of its own, so it stays.
    capabilities = [c for c in capability_registry.available() if c.handler]
    request = "Do you sell tea?"
    monkeypatch.setattr(masking, "site_name", lambda: "")
    before = [(s.capability.name, s.score) for s in routing.rank(request, capabilities)]
    monkeypatch.setattr(masking, "site_name", lambda: name)
    assert routing.name_pattern(capabilities) is None
    for capability in capabilities:
        assert routing.routed_texts(capability, None) == routing.texts_of(capability)
    after = [(s.capability.name, s.score) for s in routing.rank(request, capabilities)]
    assert after == before
    assert routing.without_site_name("Is the shop open?", routing.name_pattern(capabilities)) == "Is the shop open?"


def test_a_distinctive_site_name_is_still_replaced(demo_content, monkeypatch):
    # "Kettle" is a word of the capabilities' texts ("How many kettles are left?"), "Lantern" only of the name.
    monkeypatch.setattr(masking, "site_name", lambda: "Lantern & Kettle")
    capabilities = [c for c in capability_registry.available() if c.handler]
    pattern = routing.name_pattern(capabilities)
    assert pattern is not None
    assert routing.without_site_name("Who runs lantern and kettle?", pattern) == "Who runs you?"
    escalation = next(c for c in capabilities if "Lantern & Kettle" in c.description)
    assert "Lantern" not in " ".join(routing.routed_texts(escalation, pattern))


def test_a_request_naming_the_site_is_embedded_in_one_call(demo_content, monkeypatch):
    monkeypatch.setattr(masking, "site_name", lambda: "Lantern & Kettle")
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    routing.described(capabilities)  # the capabilities' vectors, computed outside the count
    backend = {**settings.AGENT_HANDSHAKE, "EMBEDDING_BACKEND": "tests.concierge.test_routing.EmbedCalls"}
    EmbedCalls.calls = []
    with override_settings(AGENT_HANDSHAKE=backend):
        routing.route("When was Lantern & Kettle founded?", capabilities, default=default)
        assert EmbedCalls.calls == [["When was Lantern & Kettle founded?", "When was you founded?"]]
        EmbedCalls.calls = []
        routing.route("Do you sell tea?", capabilities, default=default)
        assert EmbedCalls.calls == [["Do you sell tea?"]]


def test_the_site_name_is_no_evidence_for_a_capability(demo_content, monkeypatch):
    # The demo's name: "Lantern" is a word of no capability's texts (the test settings' "Test Site" is common
    # words there: a test-only capability says "test-only", contact and site_info say "site").
    name = "Lantern & Kettle"
    monkeypatch.setattr(masking, "site_name", lambda: name)
    person = Capability(
        name="ask_a_person",
        description=f"Pass a request to a person at {name}; the answer arrives later.",
        mode="MODE1",
        examples=(f"I'd like someone at {name} to help me",),
    )
    about = Capability(
        name="about_us",
        description="General information about this business: who runs it, its history and purpose.",
        mode="MODE1",
        examples=("Tell me about your company.",),
    )
    request = f"When was {name} founded?"
    # The texts as written favour the capability that names the site...
    raw = get_embedding_backend().embed([request, *routing.texts_of(person), *routing.texts_of(about)])
    similarities = raw[1:] @ raw[0]
    assert similarities[:3].max() > similarities[3:].max()
    # ... the routed texts and request leave the name out.
    assert name not in " ".join(routing.routed_texts(person, routing.name_pattern([person, about])))
    ranked = routing.rank(request, [person, about])
    assert ranked[0].capability is about


@pytest.mark.parametrize("query", ["Is there a privacy policy?", "Which ways of paying do you take?"])
def test_questions_about_the_sites_policies_go_to_site_info(demo_content, query):
    # site_info answers from the pages a site marks site_info (the demo's shipping and returns page among them):
    # its texts name the policies such pages state, so these no longer go to a price quote or a clarification.
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    assert routing.route(query, capabilities, default=default).chosen is capability_registry.get("site_info")


def test_the_sites_topic_is_the_direction_of_its_passages_mean_kept_in_the_cache(demo_content):
    vectors = np.array([np.asarray(v, dtype=np.float64) for v in Passage.objects.values_list("embedding", flat=True)])
    expected = vectors.mean(axis=0) / np.linalg.norm(vectors.mean(axis=0))
    direction = routing.topic()
    assert direction is not None
    assert np.allclose(direction, expected, atol=1e-5)
    with CaptureQueriesContext(connection) as queries:
        assert np.array_equal(routing.topic(), direction)
    assert not any("avg(" in query["sql"] for query in queries.captured_queries)


def test_a_large_sites_topic_is_the_mean_of_a_sample_of_its_pages(demo_content):
    vectors = np.array([np.asarray(v, dtype=np.float64) for v in Passage.objects.values_list("embedding", flat=True)])
    exact = vectors.mean(axis=0) / np.linalg.norm(vectors.mean(axis=0))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")  # the row estimate the sample's share comes from
    dimensions = vectors.shape[1]
    assert np.allclose(passages_mean(dimensions, len(vectors)), vectors.mean(axis=0), atol=1e-5)  # under the bound
    with CaptureQueriesContext(connection) as queries:
        sampled = np.asarray(passages_mean(dimensions, len(vectors) // 3, seed="state one"))
    assert "TABLESAMPLE SYSTEM" in queries.captured_queries[1]["sql"]
    # A third of the pages (or, were none drawn, all of them): a mean close to the whole's.
    assert float(sampled @ exact / np.linalg.norm(sampled)) > 0.9
    # The same state draws the same pages in every process.
    assert np.array_equal(np.asarray(passages_mean(dimensions, len(vectors) // 3, seed="state one")), sampled)


def test_the_topic_is_one_cache_entry_per_model_replaced_when_the_content_changes(demo_content):
    cache = caches[app_settings.CACHE_ALIAS]
    key = routing.topic_key(get_embedding_backend())
    first = routing.topic()
    assert cache.get(key)[0] == state.snapshot().token
    Document.objects.filter(pk=Document.objects.order_by("pk").values("pk")[:1]).delete()
    state.invalidate()
    try:
        second = routing.topic()
        assert second is not None
        assert not np.array_equal(first, second)  # computed again for the new state...
        assert cache.get(key)[0] == state.snapshot().token  # ... in the same entry, not one more per state
    finally:
        state.invalidate()


def test_while_the_vectors_are_another_models_routing_goes_on_without_the_topic(demo_content):
    capabilities = [c for c in capability_registry.available() if c.handler]
    EmbeddingIndex.objects.update(model_id="another-model")  # rolled back after the test
    caches[app_settings.CACHE_ALIAS].clear()
    assert routing.topic() is None
    ranked = routing.rank("Book me a tasting on Saturday", capabilities)
    assert ranked
    assert all(item.topical is None for item in ranked)


def test_without_passages_there_is_no_topic_and_the_fit_is_the_similarity(demo_content):
    capabilities = [c for c in capability_registry.available() if c.handler]
    try:
        Document.objects.all().delete()  # their passages with them; rolled back after the test
        state.invalidate()
        assert routing.topic() is None
        for item in routing.rank("Is the bamboo whisk sold out?", capabilities):
            assert item.topical is None
            assert item.against_content == item.score
    finally:
        state.invalidate()


def test_off_topic_removes_the_component_along_the_direction():
    direction = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    vectors = np.array([[0.6, 0.8, 0.0], [0.8, 0.0, 0.6]], dtype=np.float32)
    assert np.allclose(routing.off_topic(vectors, direction), [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert np.allclose(routing.off_topic(vectors[0], direction), [0.0, 1.0, 0.0])


def test_the_texts_are_projected_off_the_topic_once_per_model_texts_and_topic(demo_content, monkeypatch):
    # The projection of every capability's texts was computed again on every request; it depends only on the
    # model, the texts and the site's topic.
    site_info = capability_registry.get("site_info")
    examples = (*site_info.examples, f"Who are you {time.time()}")  # texts no earlier test ranked
    fresh = dataclasses.replace(site_info, name="about_us", examples=examples)
    capabilities = [*(c for c in capability_registry.available() if c.handler), fresh]
    projected: list[int] = []
    project = routing.off_topic

    def recording(vectors, direction):
        if vectors.ndim == 2:  # a capability's texts, not the request
            projected.append(len(vectors))
        return project(vectors, direction)

    monkeypatch.setattr(site_topic, "off_topic", recording)
    request = "Is the bamboo whisk sold out?"
    first = routing.rank(request, capabilities)
    assert len(routing.texts_of(fresh)) in projected  # its texts were never projected in this process
    projected.clear()
    again = routing.rank(request, capabilities)
    assert routing.rank("Book me a tasting on Saturday", capabilities)
    assert projected == []
    assert [(s.capability.name, s.score, s.topical) for s in again] == [
        (s.capability.name, s.score, s.topical) for s in first
    ]
    # The scores are the projection's as computed for this request.
    direction = routing.topic()
    off_request = project(routing.embed_query(request), direction)
    weight = app_settings.ROUTING_CUE_WEIGHT
    scores = {s.capability.name: s.score for s in first}
    for capability, matrix in zip(capabilities, routing.described(capabilities), strict=True):
        fit = routing.nearest_mean(project(matrix, direction) @ off_request)
        assert scores[capability.name] in (pytest.approx(fit, abs=1e-6), pytest.approx(fit + weight, abs=1e-6))
    # Another topic (the content changed): projected again.
    Document.objects.filter(pk=Document.objects.order_by("pk").values("pk")[:1]).delete()
    state.invalidate()
    try:
        routing.rank(request, capabilities)
        assert len(projected) == len(capabilities)
    finally:
        state.invalidate()


@pytest.mark.parametrize("query", ["Who runs this tea shop?", "When was the tea shop founded?"])
def test_the_sites_topic_is_no_evidence_for_a_capability(demo_content, query):
    # Every request to a tea shop is about tea, and so are the booking's examples ("Book me in for a tea tasting"):
    # with the topic in, the booking fits these about questions best; left out, site_info does.
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    ranked = {s.capability.name: s for s in routing.rank(query, capabilities)}
    assert ranked["book_appointment"].against_content > ranked["site_info"].against_content
    assert ranked["site_info"].score > ranked["book_appointment"].score
    assert routing.route(query, capabilities, default=default).chosen is capability_registry.get("site_info")


QUESTION_FOR_THE_CONTENT = "What is L-theanine and what does it do?"


def test_a_content_question_goes_to_the_content_even_when_the_about_texts_fit_it_better(demo_content):
    # site_info's examples are questions too, and fit it better than content_search's generic texts do; the blog
    # passage that answers it fits it better still (the about pages, site_info's own, left out of that fit).
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    site_info = capability_registry.get("site_info")
    ranked = {s.capability.name: s.score for s in routing.rank(QUESTION_FOR_THE_CONTENT, capabilities)}
    assert ranked["site_info"] > ranked["content_search"] + settings.AGENT_HANDSHAKE.get("ROUTING_MARGIN", 0.01)
    vector = routing.embed_query(QUESTION_FOR_THE_CONTENT)
    theirs = {label for c in capabilities if c is not default and not c.action_type for label in c.models}
    assert set(site_info.models) <= theirs
    fit = routing.content_fit(vector, default, tuple(sorted(theirs))) - routing.QUESTION_CONTENT_MARGIN
    assert fit > ranked["site_info"]
    assert routing.route(QUESTION_FOR_THE_CONTENT, capabilities, default=default).chosen is default


def test_the_defaults_fit_among_questions_leaves_out_the_content_the_others_answer_from(demo_content):
    # An about page fits the about question: counted for the default, it would claim site_info's questions.
    capabilities = [c for c in capability_registry.available() if c.handler]
    default = capability_registry.get("content_search")
    answering = [s for s in routing.rank("Do you ship to Canada?", capabilities) if not s.capability.action_type]
    vector = routing.embed_query("Do you ship to Canada?")
    theirs = {label for s in answering if s.capability is not default for label in s.capability.models}
    assert {"pages.page", "videos.video", "shop.product"} <= theirs  # site_info's, get_video's and get_product's
    adjusted = {s.capability.name: s.score for s in routing.as_question(answering, default, vector)}
    expected = routing.content_fit(vector, default, tuple(sorted(theirs))) - routing.QUESTION_CONTENT_MARGIN
    before = next(s.score for s in answering if s.capability is default)
    assert adjusted["content_search"] == pytest.approx(max(before, expected))
    assert routing.content_fit(vector, default) - routing.QUESTION_CONTENT_MARGIN > adjusted["content_search"] + 0.1
    assert adjusted["site_info"] == next(s.score for s in answering if s.capability.name == "site_info")
    assert routing.route("Do you ship to Canada?", capabilities, default=default).chosen.name == "site_info"


def test_the_content_is_searched_once_for_an_actions_floor_and_the_questions_fit_leaving_out_the_same(demo_content):
    # A get_<model> answers from the model a stock check acts on: the question's fit (the content outside what the
    # other answering capabilities answer from) and the stock check's floor (the content outside its object) leave
    # out the same model, and were two searches for one nearest passage.
    names = ("content_search", "get_product", "check_inventory")
    capabilities = [capability_registry.get(name) for name in names]
    default = capabilities[0]
    with CaptureQueriesContext(connection) as queries:
        route = routing.route(CONTENT_QUESTION, capabilities, default=default)
    assert route.chosen is default
    searches = [query["sql"] for query in queries.captured_queries if "<=>" in query["sql"]]
    assert len(searches) == 1, searches


@pytest.mark.parametrize("query", ["What are your hours on Saturday?", "Is the shop open on Sundays?"])
def test_opening_hours_are_asked_of_contact(demo_content, query):
    # contact answers with the profile's opening hours and its texts say so: these no longer go to the booking
    # (whose description states its hours) or to the content. contact is offered once the profile has contact
    # details, which the test profile lacks: it is added here.
    capabilities = [*(c for c in capability_registry.available() if c.handler), capability_registry.get("contact")]
    default = capability_registry.get("content_search")
    assert routing.route(query, capabilities, default=default).chosen is capability_registry.get("contact")


def test_routing_while_the_vectors_are_another_models_is_a_503_naming_the_rebuild(client, demo_content):
    """A request that names no capability while the passages hold another model's vectors: the content's fit (the
    nearest passage) cannot be measured, which was an uncaught EmbeddingModelChanged, a 500; it is unavailable, as
    for a request that names content_search."""
    EmbeddingIndex.objects.update(model_id="another-model")  # rolled back after the test
    caches[app_settings.CACHE_ALIAS].clear()
    response, body = ask(client, CONTENT_QUESTION)
    assert response.status_code == 503, body
    assert body["code"] == "unavailable"
    assert "agent_reindex --rebuild" in body["message"]


@pytest.mark.django_db
def test_the_contents_fit_is_its_nearest_passage_on_a_site_large_enough_for_the_hnsw_index(publish):
    """``content_fit`` asked the vector side for one row: with a filter (the capability's models, the registered
    ones), pgvector's iterative scan stops at the first row of its scan that passes the filter, which on the HNSW
    plan of a large site is often not the nearest one, so a question's fit to the content was too low and it
    could go to a capability it fits less. It now takes the nearest of a full candidate list."""
    from tests.testapp.models import Article

    article = publish(Article, title="Kettle", slug="kettle-hnsw", body="Our kettle whistles.")
    document = Document.objects.get(content_type__model="article", object_id=str(article.pk))
    vectors = random_passages([document])
    articles = vectors[:3000:10]
    capability = Capability(name="ask_articles", description="Questions about the articles.", mode="MODE2",
                            models=("testapp.article",))  # fmt: skip
    fits = [routing.content_fit(query, capability) for query in vectors[3000:]]
    nearest = [float((articles @ query).max()) for query in vectors[3000:]]
    # HNSW is approximate: the nearest of its candidates, not always the exact nearest; but never the first found.
    assert sum(abs(fit - best) < 1e-5 for fit, best in zip(fits, nearest, strict=True)) >= 18, (fits, nearest)
