"""Answers to clarifications on POST /agent/converse (AHP §6.3): a MODE3 capability's question for missing input,
and routing's question of which capability was meant. On the demo content, with the real embedding model and
PostgreSQL; the agent is anonymous unless a test says otherwise."""

from __future__ import annotations

import json

import pytest

from agent_handshake.concierge import routing
from agent_handshake.conf import app_settings
from agent_handshake.models import AgentClient, ApiKey, ConverseSession
from agent_handshake.registry import capability_registry
from demo_site.shop.models import Order

pytestmark = pytest.mark.django_db

URL = "/agent/converse"
#: A product the first turn's query does not name, named by an answer: by its SKU or its name.
SKU, NAME = "LK-TEA-0014", "Kakegawa Fukamushi Sencha"
#: A request that fits several capabilities alike on the demo content: routing asks which one was meant (among
#: custom_quote, check_inventory and escalate_to_human). Not "teapot" alone: a bare topic is a question for the
#: content, which no action competes for (tests/concierge/test_routing_topics.py).
AMBIGUOUS = "more teapots please"


def converse(client, body, **headers):
    response = client.post(URL, data=json.dumps({"ahp": "0.1", **body}), content_type="application/json", **headers)
    return response, response.json()


def pending_of(session_id):
    return ConverseSession.objects.get(pk=session_id).pending_clarification


# --- a MODE3 capability's question for missing input --------------------------------------------------------------


def ask_for_a_product(client):
    """A stock check whose query names no product: the session asks for it, with nothing gathered yet."""
    response, body = converse(client, {"capability": "check_inventory", "query": "Is it in stock?"})
    assert response.status_code == 200, body
    assert body["status"] == "clarification_needed", body
    pending = pending_of(body["session_id"])
    assert (pending["kind"], pending["input"], pending["missing"]) == ("input", {}, ["product"])
    return body["session_id"]


@pytest.mark.parametrize("answer", [SKU, NAME])
def test_an_answer_fills_the_field_the_first_turn_found_nothing_for(client, demo_content, answer):
    # With nothing gathered, the answer was never read: the same question came back until the turn limit.
    session_id = ask_for_a_product(client)
    response, body = converse(
        client,
        {
            "capability": "check_inventory",
            "query": "Is it in stock?",
            "session_id": session_id,
            "clarification": answer,
        },
    )
    assert response.status_code == 200, body
    assert body["status"] == "success", body
    assert body["session_id"] == session_id
    assert body["meta"]["capability_used"] == "check_inventory"
    assert SKU in body["response"]["answer"], body
    assert pending_of(session_id) is None


def test_an_answer_without_the_capability_continues_the_sessions_question(client, demo_content):
    # Routed by the session (it keeps its capability), the clarification is still the answer to its question.
    session_id = ask_for_a_product(client)
    response, body = converse(client, {"query": "Is it in stock?", "session_id": session_id, "clarification": SKU})
    assert response.status_code == 200, body
    assert body["meta"]["capability_used"] == "check_inventory", body
    assert SKU in body["response"]["answer"], body


def test_an_answer_that_names_nothing_asks_again_in_the_same_session(client, demo_content):
    session_id = ask_for_a_product(client)
    body = {"capability": "check_inventory", "query": "Is it in stock?", "session_id": session_id}
    response, answered = converse(client, {**body, "clarification": "the nice one"})
    assert response.status_code == 200, answered
    assert (answered["status"], answered["session_id"]) == ("clarification_needed", session_id), answered
    response, answered = converse(client, {**body, "clarification": SKU})
    assert answered["status"] == "success", answered


# --- one capability's question, and a request for another ------------------------------------------------------


def issue():
    agent, _ = AgentClient.objects.get_or_create(name="Clarifying agent")
    _key, secret = ApiKey.objects.issue(agent, scopes=["*"])
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_a_question_for_one_capability_is_not_answered_by_a_request_for_another(client, demo_content):
    """A session is a conversation (a routed one changes capability when a clarification chooses), so it may go
    on with another capability; but its open question is its capability's: a request for another neither reads
    the answer nor takes the input gathered, and that question is closed by the other's turn (one open question
    per session, as for content_search's own), not kept to be mixed into a later call."""
    credentials = issue()
    order = Order.objects.first()
    response, body = converse(
        client, {"capability": "order_status", "query": f"Where is order {order.number}?"}, **credentials
    )
    assert body["status"] == "clarification_needed", body
    session_id = body["session_id"]
    assert pending_of(session_id)["input"] == {"order_number": order.number}

    # check_inventory takes no order number (additionalProperties: false): given order_status's input, it is a 400.
    response, body = converse(
        client,
        {
            "capability": "check_inventory",
            "query": f"Is {SKU} in stock?",
            "session_id": session_id,
            "clarification": order.customer_email,
        },
        **credentials,
    )
    assert response.status_code == 200, body
    assert body["status"] == "success", body
    assert SKU in body["response"]["answer"], body
    assert pending_of(session_id) is None

    # order_status's question was closed: its answer now is a new request, and the order number is not kept.
    response, body = converse(
        client,
        {
            "capability": "order_status",
            "query": "Where is my order?",
            "session_id": session_id,
            "clarification": order.customer_email,
        },
        **credentials,
    )
    assert body["status"] == "clarification_needed", body
    assert "order_number" in pending_of(session_id)["missing"]


def test_an_answer_to_one_capabilitys_question_is_no_input_for_another(client, demo_content):
    session_id = ask_for_a_product(client)
    response, body = converse(
        client,
        {"capability": "custom_quote", "query": "A quote, please", "session_id": session_id, "clarification": SKU},
    )
    assert response.status_code == 200, body
    assert body["status"] == "clarification_needed", body  # asks for its own items, not a quote for the SKU
    pending = pending_of(session_id)
    assert (pending["kind"], pending["input"], pending["missing"]) == ("input", {}, ["items"])
    assert ConverseSession.objects.get(pk=session_id).capability == "custom_quote"


# --- routing's question: which capability ---------------------------------------------------------------------------


def offered(client):
    """A routing clarification for AMBIGUOUS: its session id and its options (capability names, as listed)."""
    response, body = converse(client, {"query": AMBIGUOUS})
    assert response.status_code == 200, body
    assert body["status"] == "clarification_needed", body
    options = body["clarification"]["options"]
    assert "check_inventory" in options, options  # answers without credentials: the choice that runs
    return body["session_id"], options


def assert_refused_and_still_open(client, session_id, options, answer):
    pending = pending_of(session_id)
    response, body = converse(client, {"query": AMBIGUOUS, "session_id": session_id, "clarification": answer})
    assert response.status_code == 400, body
    assert (body["code"], body["fields"]) == ("unknown_capability", ["clarification"]), body
    assert pending_of(session_id) == pending
    # Still open: an option is chosen by its number on the list offered.
    number = options.index("check_inventory") + 1
    response, body = converse(client, {"query": AMBIGUOUS, "session_id": session_id, "clarification": str(number)})
    assert response.status_code == 200, body
    assert ConverseSession.objects.get(pk=session_id).capability == "check_inventory"


ORDINAL_WORDS = {4: "fourth", 5: "fifth"}


@pytest.mark.parametrize("form", ["{}", "the {}", "option {}"])
def test_a_number_not_on_the_list_chooses_nothing(client, demo_content, form):
    # Ranked as words, "4" of three options ran the second, "the fourth" the first.
    session_id, options = offered(client)
    past = len(options) + 1
    answer = form.format(past if form != "the {}" else ORDINAL_WORDS[past])
    assert_refused_and_still_open(client, session_id, options, answer)


def test_the_name_of_a_capability_not_offered_chooses_nothing(client, demo_content):
    session_id, options = offered(client)
    other = next(c.name for c in capability_registry.available() if c.handler and c.name not in options)
    assert_refused_and_still_open(client, session_id, options, other)


def test_words_that_fit_no_option_clearly_choose_nothing(client, demo_content):
    session_id, options = offered(client)
    answer = "neither"
    candidates = [capability_registry.get(name) for name in options]
    ranked = routing.rank(answer, candidates)
    assert ranked[0].score < app_settings.ROUTING_MIN_SCORE, ranked  # ranked anyway, it got the best
    assert_refused_and_still_open(client, session_id, options, answer)


#: Words that mean nothing about any option. MiniLM gives short unrelated texts a cosine of about 0.2 to 0.34
#: with the options' texts, which cleared ROUTING_MIN_SCORE (0.2) among them: each of these chose an option
#: ("teleport" and "hello" escalate_to_human, "yes" check_inventory, "pizza" custom_quote).
UNRELATED_ANSWERS = ["teleport", "hello", "yes", "pizza", "never mind"]


@pytest.mark.parametrize("answer", UNRELATED_ANSWERS)
def test_words_unrelated_to_every_option_choose_nothing(client, demo_content, answer):
    session_id, options = offered(client)
    assert_refused_and_still_open(client, session_id, options, answer)


def test_words_that_fit_one_option_clearly_choose_it(client, demo_content):
    session_id, _ = offered(client)
    response, body = converse(client, {"query": AMBIGUOUS, "session_id": session_id, "clarification": "is it in stock"})
    assert response.status_code == 200, body
    assert ConverseSession.objects.get(pk=session_id).capability == "check_inventory"


def test_choose_picks_only_what_the_answer_names_or_clearly_means(demo_content):
    """What IntentWeb's clarification reads too: None (it lists the options again) unless the answer chooses."""
    candidates = [capability_registry.get(name) for name in ("custom_quote", "check_inventory", "escalate_to_human")]
    assert routing.choose("2", candidates).name == "check_inventory"
    assert routing.choose("the third one", candidates).name == "escalate_to_human"
    assert routing.choose("check_inventory", candidates).name == "check_inventory"
    assert routing.choose("how much would it cost", candidates).name == "custom_quote"
    for answer in ("4", "0", "the fifth", "content_search", "neither"):
        assert routing.choose(answer, candidates) is None, answer


#: Answers in words that mean one option, and the option (among custom_quote, check_inventory, escalate_to_human):
#: the options' intents, the words of the tests above, short paraphrases.
MEANT = [
    ("Get a price quote", "custom_quote"),
    ("Check whether a product is in stock", "check_inventory"),
    ("Talk to a person", "escalate_to_human"),
    ("is it in stock", "check_inventory"),
    ("how much would it cost", "custom_quote"),
    ("a price quote", "custom_quote"),
    ("quote", "custom_quote"),
    ("discount", "custom_quote"),
    ("sold out?", "check_inventory"),
    ("how many are left", "check_inventory"),
    ("speak to someone", "escalate_to_human"),
    ("a human", "escalate_to_human"),
]


def test_words_choose_an_option_only_by_fitting_it_better_than_unrelated_words_fit_any(demo_content):
    """An answer in words names no option: it chooses one only when it fits it at least
    ``ROUTING_CHOICE_MIN_SCORE``, which words unrelated to every option do not reach, and the words that mean an
    option do."""
    candidates = [capability_registry.get(name) for name in ("custom_quote", "check_inventory", "escalate_to_human")]
    floor = app_settings.ROUTING_CHOICE_MIN_SCORE
    for answer in UNRELATED_ANSWERS:
        assert routing.rank(answer, candidates)[0].score >= app_settings.ROUTING_MIN_SCORE, answer
        assert routing.choose(answer, candidates) is None, answer
    for answer, meant in MEANT:
        assert routing.rank(answer, candidates)[0].score >= floor, answer
        assert routing.choose(answer, candidates).name == meant, answer


def test_a_question_is_not_rewritten_by_another_capabilitys_open_question(client, demo_content):
    """content_search read any open question as its own: after routing asked which capability AMBIGUOUS was for, a
    question sent with the session and a clarification was answered as AMBIGUOUS (the routing question's stored
    query) plus the clarification. It reads only its own (a clarification with no ``kind``); another's question is
    closed by its turn."""
    response, body = converse(client, {"query": AMBIGUOUS})
    assert body["status"] == "clarification_needed", body
    session_id = body["session_id"]
    assert pending_of(session_id)["kind"] == routing.PENDING_KIND
    question = "How hot should the water be for gyokuro?"
    response, body = converse(
        client,
        {"capability": "content_search", "query": question, "session_id": session_id, "clarification": "gyokuro"},
    )
    assert response.status_code == 200, body
    assert body["status"] == "success", body
    turn = ConverseSession.objects.get(pk=session_id).turns[-1]
    assert "water" in turn["standalone_query"].lower(), turn
    assert pending_of(session_id) is None


@pytest.mark.parametrize(
    ("answer", "number"),
    [
        ("2", 2),
        ("the second", 2),
        ("the 2nd one", 2),
        ("Option 3.", 3),
        ("option two", 2),
        ("the first one", 1),
        # Not numbers on the list: they choose nothing, rather than the first option.
        ("the one", None),
        ("-1", None),
        ("0", 0),
        ("one of them", None),
    ],
)
def test_the_number_an_answer_names(answer, number):
    assert routing.number_named(answer) == number
