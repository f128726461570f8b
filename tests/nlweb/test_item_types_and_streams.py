"""NLWeb v0.54 ``/ask`` and ``/await``: ``query.itemType`` matched against each object's own type, by name or schema.org
IRI; the conversation named in a Promise and in the ``/await`` answers; and a capability call asked as a stream answered
as one, as the API document says (in process, Django's test client through the whole middleware stack, the real
embedding model and PostgreSQL)."""

from __future__ import annotations

import pytest

from agent_handshake.indexing import sync_and_index
from agent_handshake.registry import content_registry
from demo_site.pages.agents import PageContent
from demo_site.pages.models import Page
from tests.nlweb.test_nlweb import ask, post
from tests.nlweb_schema import assert_valid

pytestmark = pytest.mark.django_db


class TypedPageContent(PageContent):
    """The demo's pages, each with its own schema.org type (what ``get_schema_type`` is for)."""

    TYPES = {"about": "AboutPage", "faq": "FAQPage", "contact": "ContactPage"}

    def get_schema_type(self, obj: Page) -> str:
        return self.TYPES.get(obj.slug, "WebPage")


@pytest.fixture
def typed_pages(demo_content, registries):
    content_registry._configs[Page] = TypedPageContent(Page)
    for page in Page.objects.all():
        sync_and_index("pages", "page", page.pk)
    return {page.slug: page for page in Page.objects.all()}


def test_item_type_filters_by_each_objects_own_schema_type(client, typed_pages):
    """``query.itemType`` filtered by the model's declared type (``WebPage``) only: a page whose own type
    (``get_schema_type``) is the one asked for was left out, with a warning that the site has no such type, and
    a page rendered as another type was kept. Results now match the ``@type`` they are rendered with."""
    about = typed_pages["about"]
    response, body = ask(client, "Who are you, what is Lantern & Kettle?", query={"itemType": "AboutPage"})
    assert response.status_code == 200, body
    assert_valid(body)
    assert "warnings" not in body["_meta"], body["_meta"]
    assert [r["name"] for r in body["results"]] == [about.title]
    assert body["results"][0]["@type"] == "AboutPage"

    _, faq = ask(client, "frequently asked questions", query={"itemType": "faqpage"})  # any letter case
    assert [r["@type"] for r in faq["results"]] == ["FAQPage"]

    _, pages = ask(client, "Who are you, what is Lantern & Kettle?", query={"itemType": "WebPage"})
    assert pages["results"]
    assert {r["@type"] for r in pages["results"]} == {"WebPage"}, pages["results"]

    _, unknown = ask(client, "tea", query={"itemType": "Recipe"})
    assert unknown["results"] == []
    assert "AboutPage" in unknown["_meta"]["warnings"][0]  # the types it names are those results can have


@pytest.fixture
def report_key():
    from agent_handshake.models import AgentClient, ApiKey

    client = AgentClient.objects.create(name="NLWeb report agent")
    return ApiKey.objects.issue(client, scopes=["*"])[1]


def test_a_promise_and_its_await_answers_name_the_conversation(client, demo_content, report_key):
    """A long capability call continued from an Elicitation (the conversation the client started) was answered
    with a Promise without ``_meta.session_context``, and so were the ``/await`` answers: the client lost its
    conversation_id. The Promise names it, as http_example.md §4 does, and so do the ``/await`` answers to a
    client that names the job's conversation."""
    from agent_handshake.concierge import jobs

    auth = {"Authorization": f"Bearer {report_key}"}
    _, asked = post(client, "/ask", {"query": {"text": "Compile a report", "capability": "compile_report"}}, **auth)
    assert asked["_meta"]["response_type"] == "elicitation", asked
    conversation = asked["_meta"]["session_context"]["conversation_id"]
    session = {"session_context": {"conversation_id": conversation}}
    body = {
        "query": {"text": "On oolong", "capability": "compile_report", "input": {"topic": "oolong harvests"}},
        "meta": session,
    }
    response, promise = post(client, "/ask", body, **auth)
    assert response.status_code == 202, promise
    assert_valid(promise)
    assert promise["_meta"]["response_type"] == "promise"
    assert promise["_meta"]["session_context"] == {"conversation_id": conversation}
    token = promise["promise"]["token"]

    wait = {"promise_token": token, "action": "checkin", "meta": {"version": "0.54", **session}}
    response, still = post(client, "/await", wait, **auth)
    assert response.status_code == 202, still
    assert still["_meta"]["session_context"] == {"conversation_id": conversation}
    jobs.run(token)  # what the worker does
    response, done = post(client, "/await", wait, **auth)
    assert response.status_code == 200, done
    assert_valid(done)
    assert done["_meta"]["response_type"] == "answer"
    assert done["_meta"]["session_context"] == {"conversation_id": conversation}
    assert done["results"][0]["result"]["topic"] == "oolong harvests"
    # Another conversation is not this job's: it is not named.
    other = {**wait, "meta": {"session_context": {"conversation_id": "conv_12345"}}}
    _, done = post(client, "/await", other, **auth)
    assert "session_context" not in done["_meta"]


@pytest.mark.parametrize("item_type", ["https://schema.org/Product", "http://schema.org/Product", "schema:Product"])
def test_item_type_may_be_the_schema_org_iri_of_the_type(client, demo_content, item_type):
    """§3.1: filter values "should use schema.org vocabulary"; a JSON-LD client names a type by its IRI
    (``https://schema.org/Product``) or a compact IRI (``schema:Product``). Such a type was compared with the bare
    name: no results, and a warning that the site has no "https://schema.org/Product" while listing Product."""
    response, body = ask(client, "green tea", query={"itemType": item_type})
    assert response.status_code == 200, body
    assert_valid(body)
    assert "warnings" not in body["_meta"], body["_meta"]
    assert body["results"]
    assert {r["@type"] for r in body["results"]} == {"Product"}


def test_a_capability_call_asked_as_a_stream_is_one_whatever_it_answers(client, demo_content, report_key):
    """§8.4: SSE is supported via ``Accept: text/event-stream``, and the events deliver the full JSON structure. A
    question did; a capability call (an elicitation, a promise, an action's answer) and ``/await`` answered JSON
    to a client that asked for events, which an SSE client reads as an error. Each is now the events that deliver
    the JSON answer's structure, with its status."""
    from agent_handshake.concierge import jobs

    auth = {"Authorization": f"Bearer {report_key}"}
    streamed = {**auth, "Accept": "text/event-stream"}

    def both(path, body):
        as_json, json_body = post(client, path, body, **auth)
        as_stream, stream_body = post(client, path, body, **streamed)
        assert as_stream["Content-Type"] == "text/event-stream; charset=utf-8"
        assert as_stream.status_code == as_json.status_code
        return json_body, stream_body

    def same(json_body, stream_body):
        """The same structure, apart from the conversation each request started and the stream's own flag."""
        for body in (json_body, stream_body):
            body["_meta"].pop("session_context", None)
            body["_meta"].pop("streaming", None)
        assert stream_body == json_body

    elicitation = {"query": {"text": "Compile a report", "capability": "compile_report"}}
    same(*both("/ask", elicitation))
    inventory = {"text": "Is it in stock?", "capability": "check_inventory", "input": {"product": "LK-TEA-0001"}}
    answer = {"query": inventory}
    json_answer, stream_answer = both("/ask", answer)
    assert json_answer["_meta"]["response_type"] == "answer", json_answer
    same(json_answer, stream_answer)
    report = {"query": {"text": "On oolong", "capability": "compile_report", "input": {"topic": "oolong harvests"}}}
    json_promise, stream_promise = both("/ask", report)
    assert json_promise["_meta"]["response_type"] == "promise", json_promise
    assert stream_promise["_meta"]["response_type"] == "promise"
    token = stream_promise["promise"]["token"]
    jobs.run(token)
    json_done, stream_done = both("/await", {"promise_token": token, "action": "checkin"})
    assert json_done["_meta"]["response_type"] == "answer", json_done
    same(json_done, stream_done)


def test_the_api_document_says_which_nlweb_answers_may_be_streams(client, demo_content):
    paths = client.get("/openapi.json").json()["paths"]
    for path, status in (("/ask", "200"), ("/ask", "202"), ("/await", "200"), ("/await", "202")):
        content = paths[path]["post"]["responses"][status]["content"]
        assert set(content) == {"application/json", "text/event-stream"}, (path, status, content)
