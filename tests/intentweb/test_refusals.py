"""IntentWeb's refusals: a failed job's ``error`` envelope names its code where a refusal names its own, an unsafe
``callback_url`` is refused (not asked for again), a replayed or forged message costs no DNS lookup, and what a
client sent comes back bounded, markdown-escaped where it is quoted in a message, never as markup."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

import agent_handshake
from agent_handshake.concierge.job_callbacks import deliver_callback
from agent_handshake.concierge.jobs import cancel
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.models import IntentNonce, Interaction, Job, TrustedActorKey
from tests.concierge.test_callbacks import Receiver
from tests.intentweb.test_intentweb import Agent, key

pytestmark = pytest.mark.django_db

SOLD_OUT = "That blend is sold out until spring."
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>[click](javascript:alert(1))'
INVISIBLE = "\u202e\u200b\x07\x1b[31m"  # a right-to-left override, a zero-width space, a bell, an escape sequence


@pytest.fixture
def blending(registries):
    """One MODE3 capability, ``async``: a custom blend, refused (``sold_out``) for the blend BL-999."""
    for capability in list(registries[1]):
        if capability.action_type:
            registries[1].unregister(capability.name)

    @agent_handshake.capability(
        description="Order a custom tea blend.",
        action_type="async",
        intent="Order a custom tea blend",
        input_schema={
            "type": "object",
            "required": ["blend"],
            "properties": {"blend": {"type": "string", "maxLength": 40, "pattern": "^BL-[0-9]{3}$"}},
        },
        output_schema={"type": "object"},
    )
    def order_blend(invocation):
        if invocation.input["blend"] == "BL-999":
            raise agent_handshake.ActionFailed(SOLD_OUT, code="sold_out", status=409)
        return agent_handshake.Outcome({"blend": invocation.input["blend"]}, answer="Your blend is on its way.")

    return order_blend


def started(agent: Agent) -> None:
    status, reply = agent.send("intent_request", "Order a custom tea blend")
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["blend"]), reply


def safe_text(text: str, limit: int) -> None:
    """``text`` (markdown) is at most ``limit`` characters, with no markup, link or invisible character a client put
    in it: a ``<`` or a ``](`` is escaped (shown as text)."""
    assert len(text) <= limit, (len(text), text[:200])
    assert not re.search(r"(?<!\\)<|(?<!\\)\]\(", text), text
    invisible = [char for char in text if char != "\n" and unicodedata.category(char) in ("Cc", "Cf")]
    assert not invisible, (invisible, text)


# --- a failed job's error envelope ----------------------------------------------------------------------------------


def test_a_failed_jobs_error_envelope_carries_its_code_where_a_refusal_carries_its_own(client, blending):
    """A refusal's envelope names its code in ``status`` (``invalid_request``, ``rate_limited``...); a failed job's
    said ``status: failed`` whatever it failed of, so a client could not tell a blend sold out from a crash. It
    names the job's error code there, in the poll and in the callback, and the job's state in ``job_status``."""
    receiver = Receiver().start()
    try:
        agent = Agent(client, secret=key())
        started(agent)
        status, reply = agent.send("information_response", "BL-999", callback_url=receiver.url("/blend-hook"))
        assert (status, reply["status"]) == (200, "accepted"), reply
        job_id = reply["external_id"]
        assert run_job(job_id) == Job.Status.FAILED
        status, reply = agent.send("information_response", "Any news?")
        assert status == 200, reply
        assert (reply["flow_type"], reply["status"], reply["job_status"]) == ("error", "sold_out", "failed"), reply
        assert reply["external_id"] == job_id
        assert "sold out until spring" in reply["message"]
        deliver_callback(job_id)
        (request,) = receiver.requests
        posted = json.loads(request["body"])
        agent.check(posted)
        assert (posted["flow_type"], posted["status"], posted["job_status"]) == ("error", "sold_out", "failed")
    finally:
        receiver.stop()
    # A refusal of a message puts its code in the same place.
    status, refused = agent.send("information_response", "Any news?")
    assert (status, refused["flow_type"], refused["status"]) == (409, "error", "interaction_closed")


def test_a_cancelled_job_ends_its_interaction_with_the_code_cancelled(client, blending):
    agent = Agent(client, secret=key())
    started(agent)
    _, reply = agent.send("information_response", "BL-100")
    cancel(reply["external_id"])
    status, reply = agent.send("information_response", "Any news?")
    assert (status, reply["flow_type"], reply["status"], reply["job_status"]) == (200, "error", "cancelled",
                                                                                  "cancelled"), reply  # fmt: skip


# --- an unsafe callback_url -------------------------------------------------------------------------------------------


def test_an_unsafe_callback_url_is_refused_not_asked_for(client, blending):
    """The SSRF check's refusal names the field ``callback_url``; the site took it for a field of the capability's
    input and asked for it in an information_request, again after every answer. It is refused as AHP refuses it
    (400 ``invalid_request`` naming the field, saying why); the message changes nothing: sent again with a URL the
    site accepts, it is accepted."""
    agent = Agent(client, secret=key())
    started(agent)
    body = agent.envelope("information_response", "BL-100", callback_url="http://192.0.2.1/hook")
    status, reply = agent.post(body)
    assert status == 400, reply
    assert (reply["flow_type"], reply["status"], reply["fields"]) == ("error", "invalid_request", ["callback_url"])
    assert "refused" in reply["message"], reply
    assert "publicly routable" in reply["message"], reply
    assert "required_fields" not in reply
    assert not Job.objects.exists()
    assert Interaction.objects.get(interaction_id=agent.interaction_id).collected == {}
    assert not IntentNonce.objects.filter(nonce=body["attribution"]["nonce"]).exists()
    status, reply = agent.send("information_response", "BL-100", callback_url="http://127.0.0.1:9/hook")
    assert (status, reply["status"]) == (200, "accepted"), reply
    assert Job.objects.get().callback_url == "http://127.0.0.1:9/hook"


def test_a_hostile_callback_url_is_quoted_bounded_and_escaped(client, blending):
    agent = Agent(client, secret=key())
    started(agent)
    for url in (f"http://{HOSTILE.replace(' ', '')}/hook", "http://" + "a" * 1500 + "<b>x</b>.example/"):
        status, reply = agent.send("information_response", "BL-100", callback_url=url)
        assert (status, reply["status"], reply["fields"]) == (400, "invalid_request", ["callback_url"]), reply
        safe_text(reply["message"], 1000)
    assert not Job.objects.exists()


# --- the cheap checks first -------------------------------------------------------------------------------------


def test_a_replayed_or_forged_message_costs_no_dns_lookup(client, blending, settings, lookups):
    """The callback_url's host was resolved before the nonce and the signatures were checked: a replayed message, or
    one whose signature does not verify, still cost a DNS lookup (of a name server the sender chooses). Both are
    refused before the lookup; a message that passes them is looked up once."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"]}
    agent = Agent(client, secret=key())
    started(agent)
    hook = "http://localhost/hook"
    used = agent.envelope("information_response", "What blends are there?", nonce="nonce-spent-00001")
    assert agent.post(used)[0] == 200
    lookups.clear()
    replayed = agent.envelope("information_response", "BL-100", nonce="nonce-spent-00001", callback_url=hook)
    status, reply = agent.post(replayed)
    assert (status, reply["status"]) == (401, "replayed_nonce"), reply
    assert lookups == []
    TrustedActorKey.objects.create(actor_id=agent.actor_id, public_key=Agent(client).public_key)  # not its key
    status, reply = agent.send("information_response", "BL-100", callback_url=hook)
    assert (status, reply["status"]) == (401, "signature_invalid"), reply
    assert lookups == []
    TrustedActorKey.objects.filter(actor_id=agent.actor_id).update(public_key=agent.public_key)
    status, reply = agent.send("information_response", "BL-100", callback_url=hook)
    assert (status, reply["status"]) == (200, "accepted"), reply
    assert lookups == ["localhost"]


# --- what the client sent, sent back --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message", HOSTILE + "x" * 5000),
        ("protocol_version", HOSTILE),
        ("flow_type", HOSTILE + INVISIBLE),
        ("interaction_id", HOSTILE + "x" * 200),
        ("nonce", HOSTILE),
        ("query_hash", HOSTILE + INVISIBLE),
        ("locale", HOSTILE),
    ],
)
def test_an_invalid_envelope_field_is_named_not_quoted(client, field, value):
    """JSON Schema's messages begin with the value they refuse: the refusal quoted up to 200 characters of what the
    client sent (its intent, markup, control characters) in its message. It names the field, and says what is
    wrong with it."""
    agent = Agent(client)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    if field in ("nonce", "query_hash"):
        body["attribution"][field] = value
    else:
        body[field] = value
    response = client.post("/intent", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    reply = response.json()
    agent.check(reply)
    assert reply["status"] == "invalid_request"
    assert reply["message"].startswith("Invalid IntentWeb envelope:"), reply
    assert reply["fields"] == [field if field not in ("nonce", "query_hash") else f"attribution.{field}"]
    safe_text(reply["message"], 300)
    assert "xxxx" not in reply["message"]
    assert "alert" not in reply["message"]
    assert len(reply["interaction_id"]) <= 128


def test_unknown_field_names_are_bounded_and_escaped(client, blending):
    agent = Agent(client, secret=key())
    started(agent)
    names = [HOSTILE + INVISIBLE + "n" * 3000] + [f"{HOSTILE}{number}" for number in range(20)]
    status, reply = agent.send("information_response", "BL-100",
                               collected_information={name: "x" for name in names})  # fmt: skip
    assert (status, reply["status"]) == (400, "invalid_request"), reply
    safe_text(reply["message"], 1000)
    assert "blend" in reply["message"]  # the fields it has
    assert len(reply["fields"]) == len(names)
    assert all(name.startswith("collected_information.") and len(name) <= 100 for name in reply["fields"])
    assert len(json.dumps(reply)) < 6000


def test_an_actor_id_is_not_quoted_in_a_refusal_and_bounded_in_the_explanation(client, demo_content):
    actor = "https://agent.example/" + HOSTILE + INVISIBLE + "a" * 300
    forged = Agent(client, actor_id=actor)
    TrustedActorKey.objects.create(actor_id=actor, public_key=Agent(client).public_key)  # not its key
    status, reply = forged.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["status"], reply["fields"]) == (401, "signature_invalid", ["attribution.chain.0.signature"])
    safe_text(reply["message"], 300)
    unknown = Agent(client, actor_id=actor.replace("agent.example", "other.example"))
    status, reply = unknown.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200, reply
    (assumption,) = reply["explicability"][0]["assumptions"]
    assert "not verified" in assumption
    assert len(assumption) <= 200
    assert "a" * 120 not in assumption
    assert not [char for char in assumption if unicodedata.category(char) in ("Cc", "Cf")]


def test_an_invalid_value_is_quoted_bounded_and_escaped(client, blending):
    """An invalid value is named and asked for again, quoted in the message's markdown: escaped, one line, without
    its control or invisible characters, and bounded."""
    agent = Agent(client, secret=key())
    started(agent)
    status, reply = agent.send("information_response", "x", collected_information={"blend": HOSTILE + INVISIBLE})
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["blend"]), reply
    safe_text(reply["message"], 2000)
    assert "onerror" in reply["message"]  # quoted, as text


def test_a_quoted_value_keeps_the_joiners_its_words_are_written_with(client, blending):
    """What a client sent is quoted without the characters that do not show, but a Persian word's ZERO WIDTH
    NON-JOINER ("mi" ZWNJ "khaham") and an emoji sequence's ZERO WIDTH JOINER are part of how it is written: they are
    kept, where a joiner between two Latin letters and a right-to-left override are removed."""
    agent = Agent(client, secret=key())
    started(agent)
    persian, technologist = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\U0001f469\u200d\U0001f4bb"
    value = f"\u202e{persian} {technologist} or\u200cder"
    status, reply = agent.send("information_response", "x", collected_information={"blend": value})
    assert (status, reply["flow_type"], reply["required_fields"]) == (200, "information_request", ["blend"]), reply
    assert persian in reply["message"], reply["message"]
    assert technologist in reply["message"], reply["message"]
    assert "order" in reply["message"]
    assert "\u202e" not in reply["message"]


def test_a_long_quoted_value_is_cut_without_a_joiner_left_at_its_end():
    """A value cut at the limit ends with "…", and not with a joiner its cut left joining nothing."""
    from agent_handshake.intentweb.flows import cell

    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    assert cell(persian, 3) == cell(persian, 4) == "\u0645\u06cc\u2026"  # 4: its ZWNJ would end it
    assert cell(persian, 9) == persian
    assert cell("*" * 10, 5) == "\\*" * 4 + "\u2026"


def test_an_unstorable_value_under_a_long_name_is_a_bounded_refusal(client, blending):
    """A value no text column can store is refused naming its field, whose name the client chose: the refusal is
    bounded whatever the name's length."""
    agent = Agent(client, secret=key())
    started(agent)
    status, reply = agent.send("information_response", "x", collected_information={"n" * 6000: "\x00"})
    assert (status, reply["status"]) == (400, "invalid_request"), reply
    assert len(reply["message"]) <= 1000
    assert all(len(name) <= 200 for name in reply["fields"])
