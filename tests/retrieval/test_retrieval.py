"""Passages, embeddings and hybrid retrieval, on the real PostgreSQL + pgvector."""

from __future__ import annotations

import datetime
import json
import time
from io import StringIO
from itertools import pairwise

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agent_handshake import state
from agent_handshake.models import Document, EmbeddingIndex, Passage
from agent_handshake.retrieval.chunking import split_markdown
from agent_handshake.retrieval.clustering import cluster
from agent_handshake.retrieval.embeddings import EmbeddingUnavailable, OpenAIEmbeddings
from agent_handshake.retrieval.hybrid import Filters, HybridRetriever
from tests.testapp.models import Article

ARTICLES = {
    "tetsubin": (
        "Caring for a tetsubin",
        "## Rust\n\nA cast-iron kettle rusts if water is left standing in it. Empty it while it is hot and let the "
        "heat dry the inside.\n\n## Scale\n\nThe white mineral scale inside protects the iron; never scrub it away.",
    ),
    "cold-brew": (
        "Cold brew in the fridge",
        "Put 10 g of leaves in a litre of cold water and leave it for eight hours. Strain and keep it for two days.",
    ),
    "shipping": (
        "Shipping to Canada",
        "Parcels to Canada travel by tracked post and arrive in five to eight working days. Duties are prepaid.",
    ),
}


def test_markdown_structure_and_overlap():
    markdown = (
        "Intro paragraph.\n\n# Brewing\n\n## Water\n\n"
        + " ".join(f"Sentence number {n} is about water." for n in range(60))
        + "\n\n```\n# not a heading, code\n```\n\n## Leaves\n\nUse whole leaves."
    )
    passages = split_markdown(markdown, max_words=80, overlap_words=15)
    assert (passages[0].heading, passages[0].text) == ("", "Intro paragraph.")
    water = [p for p in passages if p.heading == "Brewing > Water"]
    assert len(water) >= 3
    assert all(len(p.text.split()) <= 80 + 15 for p in water)
    for before, after in pairwise(water):  # neighbours share a sentence
        assert before.text.split(". ")[-1].rstrip(".") in after.text
    assert any("# not a heading" in p.text for p in passages)
    assert passages[-1].heading == "Brewing > Leaves"
    assert [p.position for p in passages] == list(range(len(passages)))


@pytest.fixture
def articles(publish):
    return {
        slug: publish(Article, title=title, slug=slug, summary="", body=body)
        for slug, (title, body) in ARTICLES.items()
    }


@pytest.mark.django_db
def test_passages_carry_vectors_and_weighted_text(articles):
    document = Document.objects.get(path="/articles/tetsubin/")
    passages = list(Passage.objects.filter(document=document).order_by("position"))
    assert [p.heading for p in passages] == ["Rust", "Scale"]
    assert all(len(p.embedding) == 384 for p in passages)
    assert document.indexed_hash == document.content_hash
    assert EmbeddingIndex.objects.get().model_id == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.django_db
def test_each_side_and_the_fusion(articles):
    retriever = HybridRetriever()
    scope = Filters(models=["testapp.article"])
    # Full text finds the exact word; vectors find the paraphrase with no word in common.
    text = retriever.search_documents("duties prepaid", filters=scope, mode="text")
    assert text[0].url == "/articles/shipping/"
    vector = retriever.search_documents("steeping overnight in the refrigerator", filters=scope, mode="vector")
    assert vector[0].url == "/articles/cold-brew/"
    assert not retriever.search_documents("steeping overnight in the refrigerator", filters=scope, mode="text")
    fused = retriever.search_documents("how do I stop my iron kettle from rusting", filters=scope)
    assert fused[0].url == "/articles/tetsubin/"
    assert fused[0].passages[0].passage.heading == "Rust"
    assert fused[0].passages[0].vector_rank == 1


@pytest.fixture
def kettles(publish):
    """Four recent notes say "kettle"; one older article says "tetsubin" and "kettle"; one says neither."""
    recent = timezone.now()
    for n in range(4):
        publish(Article, title=f"Note {n}", slug=f"note-{n}", body=f"Our kettle number {n} whistles.",
                published_at=recent)  # fmt: skip
    publish(Article, title="Iron", slug="iron", body="A tetsubin is a cast-iron kettle from Japan.",
            published_at=recent - datetime.timedelta(days=30))  # fmt: skip
    publish(Article, title="Tea", slug="tea", body="Sencha is a steamed green tea.", published_at=recent)


def paths(passage_ids):
    return [Passage.objects.select_related("document").get(pk=pk).document.path for pk in passage_ids]


@pytest.mark.django_db
def test_full_text_ranks_the_passages_of_the_rarest_words_within_the_budget(kettles):
    retriever = HybridRetriever()
    scope = Filters(models=["testapp.article"])
    every_word = {"MAX_TERM_SHARE": 1.0}
    with override_settings(AGENT_HANDSHAKE=every_word):
        terms = retriever.query_terms("kettle tetsubin")
        assert [(term.lexeme, term.passages) for term in terms] == [("tetsubin", 1), ("kettl", 5)]
        assert terms[0].idf > terms[1].idf
        assert [t.lexeme for t in retriever.matching_terms(terms, 6)] == ["tetsubin", "kettl"]
        assert [t.lexeme for t in retriever.matching_terms(terms, 5)] == ["tetsubin"]
        with override_settings(AGENT_HANDSHAKE={**every_word, "MAX_RANKED_ROWS": 6}):
            ranked = retriever.search_documents("kettle tetsubin", filters=scope, mode="text")
        assert ranked[0].url == "/articles/iron/"
        assert sorted(hit.url for hit in ranked[1:]) == [f"/articles/note-{n}/" for n in range(4)]
        with override_settings(AGENT_HANDSHAKE={**every_word, "MAX_RANKED_ROWS": 5}):
            # The rarest word's passage is enough for one candidate: only it is ranked.
            assert paths(retriever.text_candidates("kettle tetsubin", scope, 1)) == ["/articles/iron/"]
            # Too few for five: the passages of every word are ranked too, the rare word's first.
            widened = paths(retriever.text_candidates("kettle tetsubin", scope, 5))
            assert widened[0] == "/articles/iron/"
            assert sorted(widened[1:]) == [f"/articles/note-{n}/" for n in range(4)]
            # The rarest word is always used; past the budget its passages are cut to the budget.
            assert len(retriever.text_candidates("kettle", scope, 50)) == 5
        with override_settings(AGENT_HANDSHAKE={**every_word, "MAX_RANKED_ROWS": 3}):
            assert len(retriever.text_candidates("kettle", scope, 50)) == 3


@pytest.mark.django_db
def test_full_text_within_filters_that_exclude_the_rarest_word(kettles):
    """The passage counts are the site's: within a filter the rarest word may match nothing."""
    retriever = HybridRetriever()
    recent = Filters(models=["testapp.article"], published_after=timezone.now() - datetime.timedelta(days=1))
    with override_settings(AGENT_HANDSHAKE={"MAX_TERM_SHARE": 1.0, "MAX_RANKED_ROWS": 5}):
        found = paths(retriever.text_candidates("tetsubin kettle", recent, 50))
    assert sorted(found) == [f"/articles/note-{n}/" for n in range(4)]


@pytest.mark.django_db
def test_full_text_weights_rare_words_above_repeated_common_ones(publish):
    publish(Article, title="One", slug="one", body="The kettle, the kettle, the kettle: a kettle for every kettle.")
    publish(Article, title="Two", slug="two", body="A tetsubin.")
    # IDF grows with the passage count PostgreSQL estimates for the whole table (other tests' rows too): enough
    # "kettle"s keep its weight well below "tetsubin"'s whatever that estimate is here.
    for n in range(30):
        publish(Article, title=f"Filler {n}", slug=f"filler-{n}", body=f"Kettle {n}.")
    retriever = HybridRetriever()
    with override_settings(AGENT_HANDSHAKE={"MAX_TERM_SHARE": 1.0}):
        ranked = retriever.search_documents("kettle tetsubin", filters=Filters(models=["testapp.article"]), mode="text")
    # Without IDF weights five "kettle"s would outscore one "tetsubin" (ts_rank counts occurrences).
    assert ranked[0].url == "/articles/two/"
    assert ranked[1].url == "/articles/one/"


@pytest.mark.django_db
def test_full_text_lexemes_with_quotes_and_backslashes(publish):
    publish(Article, title="Links", slug="links", body=r"See ex.com/it's:here and C:\\tea\\o'neil for more.")
    retriever = HybridRetriever()
    scope = Filters(models=["testapp.article"])
    terms = [term.lexeme for term in retriever.query_terms(r"ex.com/it's:here C:\\tea\\o'neil")]
    assert any("'" in lexeme for lexeme in terms)
    assert [hit.url for hit in retriever.search_documents(r"ex.com/it's:here", filters=scope, mode="text")] == [
        "/articles/links/"
    ]


@pytest.mark.django_db
def test_unchanged_content_is_not_embedded_again(articles, django_capture_on_commit_callbacks):
    article = articles["cold-brew"]
    before = list(Passage.objects.filter(document__path="/articles/cold-brew/").values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        article.save()
    assert list(Passage.objects.filter(document__path="/articles/cold-brew/").values_list("pk", flat=True)) == before
    with django_capture_on_commit_callbacks(execute=True):
        article.body += " Add a slice of lemon."
        article.save()
    after = Passage.objects.filter(document__path="/articles/cold-brew/")
    assert set(after.values_list("pk", flat=True)).isdisjoint(before)
    assert "lemon" in after.get().text


@pytest.mark.django_db
def test_deleting_an_object_removes_its_passages(articles, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        articles["shipping"].delete()
    assert not Passage.objects.filter(document__path="/articles/shipping/").exists()


# The openai embedding backend, against the fake OpenAI-compatible server.


def test_openai_embeddings_batch_and_normalise(fake_openai):
    backend = OpenAIEmbeddings(model="fake-embed", base_url=fake_openai.base_url, batch_size=2, max_retries=0)
    vectors = backend.compute(["green tea", "black tea", "oolong", "white tea", "puerh"])
    calls = [r for r in fake_openai.requests if r["path"].endswith("/embeddings")]
    assert [len(call["json"]["input"]) for call in calls] == [2, 2, 1]
    assert vectors.shape == (5, fake_openai.dimensions)
    assert abs(float((vectors**2).sum(axis=1).max()) - 1.0) < 1e-5
    assert backend.model_id == "openai:fake-embed"


def test_openai_embeddings_retry_with_backoff_then_succeed(fake_openai):
    fake_openai.fail_next = [503, 429]
    backend = OpenAIEmbeddings(model="fake-embed", base_url=fake_openai.base_url, max_retries=3)
    assert backend.compute(["sencha"]).shape == (1, fake_openai.dimensions)
    assert len(fake_openai.requests) == 3


def test_openai_embeddings_unreachable_is_a_clear_error():
    backend = OpenAIEmbeddings(model="fake-embed", base_url="http://127.0.0.1:9/v1", max_retries=1, timeout=2)
    with pytest.raises(EmbeddingUnavailable, match=r"Cannot reach the embeddings server at http://127\.0\.0\.1:9/v1"):
        backend.compute(["sencha"])


@pytest.mark.django_db
def test_a_new_embedding_model_requires_a_rebuild(client, articles, fake_openai):
    openai_settings = {
        "INDEX_ON_SAVE": "sync",
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"model": "fake-embed", "base_url": fake_openai.base_url, "max_retries": 0},
    }
    body = json.dumps({"capability": "content_search", "query": "How do I cold brew tea?"})
    with override_settings(AGENT_HANDSHAKE=openai_settings):
        response = client.post("/agent/converse", body, content_type="application/json")
        assert response.status_code == 503
        assert response.json()["code"] == "unavailable"
        assert "agent_reindex --rebuild" in response.json()["message"]
        with pytest.raises(CommandError, match="--rebuild"):
            call_command("agent_reindex", "--model", "testapp.article", stdout=StringIO())
        out = StringIO()
        call_command("agent_reindex", "--rebuild", stdout=out)
        assert "Dropped every passage" in out.getvalue()
        index = EmbeddingIndex.objects.get()
        assert (index.model_id, index.dimensions) == ("openai:fake-embed", fake_openai.dimensions)
        assert {len(p.embedding) for p in Passage.objects.all()} == {fake_openai.dimensions}
        response = client.post("/agent/converse", body, content_type="application/json")
        assert response.status_code == 200, response.content
        assert response.json()["response"]["sources"][0]["url"] == "/articles/cold-brew/"


@pytest.mark.django_db
def test_a_model_unregistered_since_its_passages_were_written_is_not_served(client, articles, registries):
    """Its documents stay in the table until agent_reindex removes them; an unrestricted search (no model filter)
    served them meanwhile, through every door and in routing's content fit."""
    content, _ = registries
    body = json.dumps({"capability": "content_search", "query": "How do I stop my iron kettle from rusting?"})
    response = client.post("/agent/converse", body, content_type="application/json")
    assert response.json()["response"]["sources"][0]["url"] == "/articles/tetsubin/"
    content.unregister(Article)
    state.invalidate()  # as the restart that deploys the change would
    response = client.post("/agent/converse", body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert not any(s["url"].startswith("/articles/") for s in response.json()["response"]["sources"])
    retriever = HybridRetriever()
    assert not retriever.search("kettle rusts", mode="text")
    assert not retriever.search("kettle rusts", mode="vector")


@pytest.mark.django_db
def test_filtered_vector_candidates_come_nearest_first(publish):
    """With a filter, the vector side scans the HNSW graph iteratively (``hnsw.iterative_scan = relaxed_order``),
    and pgvector then returns the rows of its later scans after those of the first, nearer or not: passages came
    out of distance order, so their vector ranks (and a vector search's hits) were in the wrong order."""
    publish(Article, title="Kettle", slug="kettle", body="Our kettle whistles.")
    document = Document.objects.get()
    old, new = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC), timezone.now()
    vectors = np.random.default_rng(5).standard_normal((3011, 384)).astype(np.float32)
    Passage.objects.bulk_create(
        Passage(
            document=document,
            position=n,
            text=f"Passage {n}.",
            title="Kettle",
            model_label="testapp.article",
            ahp_content_type="article",
            published_at=old if n % 10 == 0 else new,  # 300 pass the filter, a tenth of the graph's nodes
            embedding=vectors[n],
        )
        for n in range(1, 3001)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Passage._meta.db_table}")
        cursor.execute("SET enable_seqscan = off")  # the plan of a large site: the HNSW index (rolled back after)
    retriever = HybridRetriever()
    scope = Filters(published_before=datetime.datetime(2021, 1, 1, tzinfo=datetime.UTC))
    for query in vectors[3001:]:  # not passages'
        similarities = [similarity for _, similarity in retriever.vector_candidates(query, scope, 50)]
        assert len(similarities) == 50
        assert similarities == sorted(similarities, reverse=True)
        hits = retriever.search("", limit=50, filters=scope, mode="vector", query_vector=query)
        assert [hit.similarity for hit in hits] == similarities


def test_merging_clusters_costs_no_more_than_forming_them():
    """The merge step recomputed every pair of centroids' similarity after each merge: with many clusters to merge
    (300 pairs that the order split, each brought together by a later vector) it took 25 times as long as forming
    the clusters did (2.5 s); now a merge updates the merged cluster's similarities only."""
    pairs = 300
    basis = np.eye(2 * pairs)

    def at(degrees: float) -> np.ndarray:  # one vector per pair, in the pair's own plane
        return np.cos(np.radians(degrees)) * basis[0::2] + np.sin(np.radians(degrees)) * basis[1::2]

    # At 0.8 (36.9°): 0° and 40° start two clusters; 15° joins the first, whose centroid (7.5°) is then alike
    # to the second's (cos 32.5° = 0.84), so the two are merged.
    apart, merged = np.vstack([at(0), at(40)]), np.vstack([at(0), at(40), at(15)])

    def best_time(vectors: np.ndarray) -> tuple[float, list]:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            groups = cluster(vectors, 0.8)
            times.append(time.perf_counter() - started)
        return min(times), groups

    forming, groups = best_time(apart)
    assert len(groups) == 2 * pairs
    merging, groups = best_time(merged)
    assert sorted(group.members for group in groups) == [[k, pairs + k, 2 * pairs + k] for k in range(pairs)]
    assert merging < 6 * forming + 0.05


def test_the_embedding_cache_keeps_one_models_sizes_apart(fake_openai):
    """One model at two sizes (the openai backend's ``dimensions`` option): the cache was the model's, so after the
    setting changed in the process the query's stored vector of the old size was served, a 500 in the SQL cast."""
    full = OpenAIEmbeddings(model="fake-embed", base_url=fake_openai.base_url, max_retries=0)
    assert full.embed(["sencha in two sizes"]).shape == (1, 64)
    fake_openai.dimensions = 32
    shortened = OpenAIEmbeddings(model="fake-embed", dimensions=32, base_url=fake_openai.base_url, max_retries=0)
    assert shortened.embed(["sencha in two sizes"]).shape == (1, 32)
