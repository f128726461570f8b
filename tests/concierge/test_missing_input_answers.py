"""An agent's answer to the site's question for a MODE3 capability's missing input is read the same way by every
front door that asks: AHP's clarification (POST /agent/converse), MCP's missing_field (tools/call), NLWeb's
elicitation (POST /ask) and IntentWeb's information_request (POST /intent).

The demo's book_appointment asked for the visitor's name (a free-text field); the answer "name: Ada Lovelace" was
not read on AHP, MCP and NLWeb (only IntentWeb read labels), so the same question came back until the session's
turn limit. The plain answer "Ada Lovelace" fills the one field asked for; when two were asked, what the answer
plainly gives (an email address) is kept and the site asks again for the rest, saying how to label the values."""

from __future__ import annotations

import json

import pytest

from agent_handshake.models import AgentClient, ApiKey, ConverseSession
from demo_site.shop.models import Appointment
from tests.ahp.test_mode3 import STRUCTURED
from tests.intentweb.test_intentweb import Agent
from tests.mcp.test_mcp import call, tasting_booking
from tests.nlweb.test_nlweb import post

pytestmark = pytest.mark.django_db

DOORS = ["ahp", "mcp", "nlweb", "intentweb"]


def secret() -> str:
    agent, _ = AgentClient.objects.get_or_create(name="Answering agent")
    return ApiKey.objects.issue(agent, scopes=["*"])[1]


def request_without(*fields: str) -> str:
    """A booking request in words stating book_appointment's service, date, time and email address, but
    ``fields``. It never states the name: no extractor reads a name from words, so the site asks for it."""
    booking = tasting_booking()
    said = {
        "service": "a tea-tasting",
        "date": f"on {booking['date']}",
        "time": "at 11:00",
        "email": f"confirmation to {booking['email']}",
    }
    return "Please book " + ", ".join(words for name, words in said.items() if name not in fields)


class Door:
    """One front door as an agent uses it: a request in words, then answers to the site's questions. ``asked``
    holds the fields the last question asked for and ``question`` its text; ``done`` whether the call ran."""

    def __init__(self, client, name: str, capability: str = "book_appointment"):
        self.client, self.name, self.capability = client, name, capability
        self.secret = secret()
        self.session: str | None = None
        self.agent = Agent(client, secret=self.secret)  # IntentWeb's signed envelopes
        self.asked: list[str] = []
        self.question = ""
        self.done = False
        self.result: dict = {}
        self.first = ""

    def says(self, text: str, *, first: bool = False) -> None:
        self.first = text if first else self.first
        getattr(self, f"via_{self.name}")(text, first)

    def via_ahp(self, text: str, first: bool) -> None:
        body = {"ahp": "0.1", "capability": self.capability, "query": self.first, "context": {}}
        body["context"]["accept_types"] = STRUCTURED
        if not first:
            body.update(session_id=self.session, clarification=text)
        response = self.client.post(
            "/agent/converse",
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {self.secret}",
        )
        reply = response.json()
        assert response.status_code == 200, reply
        self.done = reply["status"] == "success"
        if reply["status"] == "clarification_needed":
            self.session = reply["session_id"]
            self.question = reply["clarification"]["question"]
            self.asked = ConverseSession.objects.get(pk=self.session).pending_clarification["missing"]
        else:
            assert self.done, reply
            payload = reply["response"]["payload"]
            self.result = payload["result"] if "result" in payload else payload["data"]  # an action's, a query's

    def via_mcp(self, text: str, first: bool) -> None:
        arguments = {"query": text} if first else {"query": text, "session_id": self.session}
        response, reply = call(
            self.client, self.capability, arguments, version="2025-06-18", HTTP_AUTHORIZATION=f"Bearer {self.secret}"
        )
        assert response.status_code == 200, reply
        result = reply["result"]
        self.done = not result["isError"]
        if not self.done:
            assert result["_meta"]["code"] == "missing_field", result
            self.session = result["_meta"]["session_id"]
            self.asked = result["_meta"]["missing"]
            self.question = result["content"][0]["text"]
        else:
            self.result = result["structuredContent"]

    def via_nlweb(self, text: str, first: bool) -> None:
        body: dict = {"query": {"text": text, "capability": self.capability}}
        if not first:
            body["meta"] = {"session_context": {"conversation_id": self.session}}
        response, reply = post(self.client, "/ask", body, Authorization=f"Bearer {self.secret}")
        assert response.status_code == 200, reply
        kind = reply["_meta"]["response_type"]
        self.done = kind != "elicitation"
        if not self.done:
            self.session = reply["_meta"]["session_context"]["conversation_id"]
            self.asked = [question["id"] for question in reply["elicitation"]["questions"]]
            self.question = reply["elicitation"]["text"]
        else:
            self.result = reply["results"][0]["result"]

    def via_intentweb(self, text: str, first: bool) -> None:
        status, reply = self.agent.send("intent_request" if first else "information_response", text)
        assert status == 200, reply
        self.done = reply["flow_type"] == "execution_result"
        if not self.done:
            assert reply["flow_type"] == "information_request", reply
            self.asked = reply["required_fields"]
            self.question = reply["message"]
        else:
            self.result = reply["result"]


def booked() -> Appointment:
    return Appointment.objects.get()


# --- one field asked for --------------------------------------------------------------------------------------------


def asked_for_name_and_email(client, door: str) -> Door:
    """An agent on ``door`` whose booking request left out the name and the email, and was asked for both."""
    agent = Door(client, door)
    agent.says(request_without("name", "email"), first=True)
    assert (agent.done, agent.asked) == (False, ["name", "email"]), agent.question
    return agent


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("answer", ["name: Ada Lovelace", "Name = Ada Lovelace.", "Ada Lovelace"])
def test_an_answer_to_the_question_for_a_text_field_fills_it(client, demo_content, door, answer):
    # The label was not read on AHP, MCP and NLWeb: asked for the name, "name: Ada Lovelace" got the same question.
    agent = Door(client, door)
    agent.says(request_without("name"), first=True)
    assert (agent.done, agent.asked) == (False, ["name"]), agent.question
    agent.says(answer)
    assert agent.done, agent.question
    assert (booked().name, booked().email) == ("Ada Lovelace", "ada@example.com")
    assert (agent.result["reference"], agent.result["name"]) == (booked().reference, "Ada Lovelace")


# --- two fields asked for -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    "answer",
    [
        "name: Ada Lovelace; email: ada@example.com",
        "name: Ada Lovelace\nemail: ada@example.com",
        "Name: Ada Lovelace, Email: ada@example.com.",
        "email = ada@example.com, name = Ada Lovelace",
    ],
)
def test_a_labelled_answer_to_two_fields_fills_each(client, demo_content, door, answer):
    # A comma before the next label ended nothing: the name became "Ada Lovelace, Email: ada@example.com".
    agent = asked_for_name_and_email(client, door)
    agent.says(answer)
    assert agent.done, agent.question
    assert (booked().name, booked().email) == ("Ada Lovelace", "ada@example.com")


@pytest.mark.parametrize("door", DOORS)
def test_a_plain_answer_to_two_fields_keeps_what_it_plainly_gives_and_asks_for_the_rest(client, demo_content, door):
    agent = asked_for_name_and_email(client, door)
    # Which field the words are is not guessed: both are asked for again, nothing is booked.
    agent.says("Ada Lovelace")
    assert (agent.done, agent.asked) == (False, ["name", "email"]), agent.question
    # The address is plainly one; the words beside it are not taken as the name.
    agent.says("Ada Lovelace, ada@example.com")
    assert (agent.done, agent.asked) == (False, ["name"]), agent.question
    assert not Appointment.objects.exists()
    # Now one field is asked for: the plain answer is its value.
    agent.says("Ada Lovelace")
    assert agent.done, agent.question
    assert (booked().name, booked().email) == ("Ada Lovelace", "ada@example.com")


@pytest.mark.parametrize("door", DOORS)
def test_the_question_asked_again_says_what_was_taken_and_how_to_label(client, demo_content, door):
    agent = asked_for_name_and_email(client, door)
    assert 'Give each value after its name, one per line or separated by ";" ("name: ...; email: ...")' in (
        agent.question
    )
    assert agent.question.startswith("To book appointment, I still need:")  # no answer yet, nothing to say of one
    agent.says("Ada Lovelace")
    assert agent.question.startswith("Your answer did not give what I asked for. To book appointment, I still need:")
    assert "name: ...; email: ..." in agent.question
    agent.says("Ada Lovelace, ada@example.com")
    assert agent.question.startswith("Thank you: I have email now. To book appointment, I still need: name:")
    assert "Give each value" not in agent.question  # one field: a plain answer will do


# --- a field the capability's own extractor reads ---------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_an_answer_the_capabilitys_extractor_finds_nothing_in_asks_again(client, demo_content, door):
    # check_inventory reads its product from text itself: words that name no product are not its value (the
    # lookup ran with "the nice one" and refused it), the question stands and a product's name answers it.
    agent = Door(client, door, "check_inventory")
    agent.says("Is it in stock?", first=True)
    assert (agent.done, agent.asked) == (False, ["product"]), agent.question
    agent.says("the nice one")
    assert (agent.done, agent.asked) == (False, ["product"]), agent.question
    agent.says("product: Kakegawa Fukamushi Sencha")
    assert agent.done, agent.question
    assert agent.result["sku"] == "LK-TEA-0014", agent.result
