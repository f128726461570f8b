"""IntentWeb 1.0 (``/intentmanifest.yaml``, ``POST /intent``), with a client written from the spec and NOTES.md's
signing profile: it hashes and signs with hashlib, rfc8785 and cryptography directly, verifies every response's
site signature with the key the manifest publishes, and checks every envelope against the upstream JSON Schema
(tests/data/intentweb/intent-envelope.json)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets

import jsonschema
import pytest
import rfc8785
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.job_callbacks import deliver_callback
from agent_handshake.concierge.jobs import complete_waiting
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.models import AgentClient, ApiKey, Interaction, Job, TrustedActorKey
from demo_site.shop.models import Appointment
from tests.conftest import DATA
from tests.mcp.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db

PEERS = DATA / "intentweb"
UPSTREAM = json.loads((PEERS / "intent-envelope.json").read_text())
UPSTREAM_VALIDATOR = jsonschema.Draft202012Validator(UPSTREAM, format_checker=jsonschema.FormatChecker())


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def now(offset: int = 0) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def key(scopes=("*",)) -> str:
    agent, _ = AgentClient.objects.get_or_create(name="IntentWeb agent")
    return ApiKey.objects.issue(agent, scopes=list(scopes))[1]


class Agent:
    """An IntentWeb client, from §3 and §5 and the profile NOTES.md fixes."""

    def __init__(self, client, *, secret: str | None = None, actor_id: str = "https://agent.example/assistant"):
        self.client = client
        self.secret = secret
        self.actor_id = actor_id
        self.private_key = Ed25519PrivateKey.generate()
        self.interaction_id = "conv-" + secrets.token_hex(8)
        self.query_hash = ""
        self.site_key: Ed25519PublicKey | None = None

    @property
    def public_key(self) -> str:
        return b64url(self.private_key.public_key().public_bytes_raw())

    def signature(self, query_hash: str, nonce: str, timestamp: str, actor_id: str | None = None) -> str:
        payload = {"actor_id": actor_id or self.actor_id, "nonce": nonce, "query_hash": query_hash,
                   "timestamp": timestamp}  # fmt: skip
        return b64url(self.private_key.sign(rfc8785.dumps(payload)))

    def envelope(self, flow_type: str, message: str, *, nonce=None, timestamp=None, **extra) -> dict:
        body = {"protocol_version": "1.0", "flow_type": flow_type, "message": message,
                "interaction_id": self.interaction_id}  # fmt: skip
        if flow_type == "intent_request" and not self.query_hash:
            self.query_hash = hashlib.sha256(rfc8785.dumps(body)).hexdigest()
        nonce = nonce or secrets.token_urlsafe(16)
        timestamp = timestamp or now()
        entry = {"actor_type": "ai_agent", "actor_id": self.actor_id, "timestamp": timestamp,
                 "signature": self.signature(self.query_hash, nonce, timestamp)}  # fmt: skip
        body["attribution"] = {"query_hash": self.query_hash, "nonce": nonce, "timestamp": timestamp, "chain": [entry]}
        body["timestamp"] = timestamp
        assert not list(UPSTREAM_VALIDATOR.iter_errors(body))
        return {**body, **extra}

    def send(self, flow_type: str, message: str, *, headers=None, **extra) -> tuple[int, dict]:
        body = self.envelope(flow_type, message, **extra)
        return self.post(body, headers=headers)

    def post(self, body: dict, *, headers=None) -> tuple[int, dict]:
        headers = dict(headers or {})
        if self.secret:
            headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {self.secret}")
        response = self.client.post("/intent", json.dumps(body), content_type="application/json", **headers)
        reply = response.json()
        self.check(reply)
        return response.status_code, reply

    def check(self, reply: dict) -> None:
        """Every response: a valid envelope, signed by the site with the key its manifest publishes."""
        errors = [error.message for error in UPSTREAM_VALIDATOR.iter_errors(reply)]
        assert not errors, (errors, reply)
        if self.site_key is None:
            published = yaml.safe_load(self.client.get("/intentmanifest.yaml").content)["attribution"]
            self.site_key = Ed25519PublicKey.from_public_bytes(unb64url(published["public_key"]))
            self.site_actor = published["actor_id"]
        attribution = reply["attribution"]
        (entry,) = attribution["chain"]
        assert entry["actor_type"] == "intent_site"
        assert entry["actor_id"] == self.site_actor
        signed = {"actor_id": entry["actor_id"], "nonce": attribution["nonce"],
                  "query_hash": attribution["query_hash"], "timestamp": entry["timestamp"]}  # fmt: skip
        self.site_key.verify(unb64url(entry["signature"]), rfc8785.dumps(signed))  # raises if it does not verify


# --- the manifest -------------------------------------------------------------------------------------------------


def test_the_manifest_is_yaml_like_upstreams_from_the_registry(client, demo_content):
    response = client.get("/intentmanifest.yaml")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    text = response.content.decode("utf-8")
    manifest = yaml.safe_load(text)
    upstream = yaml.safe_load((PEERS / "intentmanifest.bellacucina-full.yaml").read_text())
    assert {"manifest_version", "company", "last_updated", "capabilities", "contact"} <= set(manifest)
    assert manifest["manifest_version"] == "1.0"
    assert manifest["company"] == "Test Site"
    datetime.date.fromisoformat(manifest["last_updated"])
    assert manifest["contact"]["intent_endpoint"] == "http://testserver/intent"
    upstream_keys = {key for item in upstream["capabilities"] for key in item} | {"capability"}
    names = {item["capability"]: item for item in manifest["capabilities"]}
    assert {"check_inventory", "order_status", "custom_quote", "book_appointment", "escalate_to_human"} <= set(names)
    for item in manifest["capabilities"]:
        assert set(item) <= upstream_keys
        assert item["intent"]
        assert item["description"]
    booking = names["book_appointment"]
    assert booking["intent"] == "Book a tasting or a teaware consultation"
    assert "Book a tea tasting for 2 next Saturday at 11:00" in booking["examples"]
    assert any(line.startswith("The day, as YYYY-MM-DD") for line in booking["requires"])
    assert any("tea-tasting" in line for line in booking["requires"])
    assert any("Optionally" in line and "party_size" in line for line in booking["requires"])
    assert "Up to 6 people" in booking["constraints"]
    assert any("API key" in note for note in booking["notes"])
    # Conditional like agent.json.
    again = client.get("/intentmanifest.yaml", HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304
    # Linked from the AHP manifest and llms.txt, with the same key.
    integration = client.get("/.well-known/agent.json").json()["integrations"]["intentweb"]
    assert integration["manifest"] == "/intentmanifest.yaml"
    assert integration["url"] == "/intent"
    assert integration["public_key"] == manifest["attribution"]["public_key"]
    assert "http://testserver/intentmanifest.yaml" in client.get("/llms.txt").content.decode()


def test_the_manifest_publishes_the_profile_hours_and_location(client, demo_content):
    from agent_handshake.models import SiteProfile

    profile = SiteProfile.load()
    profile.schema_type = "https://schema.org/Store"
    profile.operating_hours = "shop: Tuesday to Saturday, 10:00-17:00\nclosed: Sunday and Monday"
    profile.postal_address = "1187 SE Division St\nPortland, OR"
    profile.save()
    manifest = yaml.safe_load(client.get("/intentmanifest.yaml").content)
    assert manifest["schema_type"] == "https://schema.org/Store"
    assert manifest["location"] == {"address": "1187 SE Division St Portland, OR"}
    hours = {"shop": "Tuesday to Saturday, 10:00-17:00", "closed": "Sunday and Monday"}
    assert manifest["operating_hours"] == hours
    booking = next(item for item in manifest["capabilities"] if item["capability"] == "book_appointment")
    assert booking["operating_hours"] == hours
    attribution = manifest["attribution"]
    assert attribution["name"] == "ahp-intentweb-ed25519-jcs-v1"
    assert len(unb64url(attribution["public_key"])) == 32
    assert attribution["did"] == "did:agent-semantic-protocol:" + hashlib.sha256(
        unb64url(attribution["public_key"])).hexdigest()  # fmt: skip


# --- whole intents ------------------------------------------------------------------------------------------------


def test_a_query_intent_is_answered_in_one_turn(client, demo_content):
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert reply["status"] == "confirmed"
    assert reply["interaction_id"] == agent.interaction_id
    assert reply["attribution"]["query_hash"] == agent.query_hash
    assert reply["result"]["sku"] == "LK-TEA-0001"
    assert "LK\\-TEA\\-0001" in reply["message"] or "LK-TEA-0001" in reply["message"]
    (explained,) = reply["explicability"]
    assert "check_inventory" in explained["interpretation"]
    assert 0 < explained["confidence"] <= 1
    assert "not verified" in explained["assumptions"][0]
    # Terminal: the interaction is over.
    status, reply = agent.send("information_request", "And LK-TEA-0002?")
    assert status == 409
    assert reply["flow_type"] == "error"
    assert reply["status"] == "interaction_closed"


def test_a_booking_is_collected_turn_by_turn_corrected_and_executed(client, demo_content):
    booking = tasting_booking()
    later = datetime.date.fromisoformat(booking["date"]) + datetime.timedelta(days=1)
    while later.weekday() in (0, 6):
        later += datetime.timedelta(days=1)
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I'd like to book a tea-tasting in the shop")
    assert status == 200, reply
    assert reply["flow_type"] == "information_request"
    assert reply["collected_information"] == {"service": "tea-tasting"}
    assert reply["required_fields"] == ["date", "time", "name", "email"]
    assert reply["required_information"][0] == "date: The day, as YYYY-MM-DD"
    assert "| Service | tea-tasting |" in reply["message"]
    status, reply = agent.send("information_response", f"On {booking['date']} at 11:00, please.")
    assert reply["collected_information"] == {"service": "tea-tasting", "date": booking["date"], "time": "11:00"}
    assert reply["required_fields"] == ["name", "email"]
    # A correction replaces an earlier answer; a labelled answer names its field.
    status, reply = agent.send("information_response", f"Actually make it {later.isoformat()}. email: ada@example.com")
    assert reply["collected_information"]["date"] == later.isoformat()
    assert reply["required_fields"] == ["name"]
    assert not Appointment.objects.exists()
    status, reply = agent.send("information_response", "Ada Lovelace", headers={"HTTP_IDEMPOTENCY_KEY": "intent-1"})
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert reply["status"] == "confirmed"
    appointment = Appointment.objects.get()
    assert reply["external_id"] == appointment.reference
    assert appointment.name == "Ada Lovelace"
    assert appointment.date == later
    assert reply["result"]["reference"] == appointment.reference
    interaction = Interaction.objects.get(interaction_id=agent.interaction_id)
    assert interaction.status == Interaction.Status.DONE
    assert interaction.external_id == appointment.reference
    # A retry of the last message (same Idempotency-Key, a new nonce) gets the same result, not a new booking.
    status, again = agent.send("information_response", "Ada Lovelace", headers={"HTTP_IDEMPOTENCY_KEY": "intent-1"})
    assert status == 200
    assert again["external_id"] == appointment.reference
    assert Appointment.objects.count() == 1


def only_title_lookup(capabilities) -> list[str]:
    """``title_lookup`` as the only MODE3 capability (routing has one to choose): one free-text field; returns the
    list of the titles it is run with."""
    from agent_handshake import Capability, Outcome

    runs: list[str] = []

    def lookup(invocation) -> Outcome:
        runs.append(invocation.input["title"])
        return Outcome({"title": invocation.input["title"]}, answer=f"Looked up {invocation.input['title']}.")

    for capability in list(capabilities):
        if capability.action_type:
            del capabilities._capabilities[capability.name]
    capabilities.register(Capability(
        name="title_lookup", description="Find a page by its title.", mode="MODE3", action_type="query",
        response_types=["application/data"], intent="Look up a page by its title", handler=lookup,
        input_schema={"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"title": {"type": "string"}}},
    ))  # fmt: skip
    return runs


def test_the_intent_itself_is_not_taken_as_the_answer_to_a_one_field_question(client, demo_content, registries):
    """A capability with one free-text field: the intent names no value, so the site asks; the answer to that
    question may then be the whole message."""
    only_title_lookup(registries[1])
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Look up a page by its title")
    assert status == 200, reply
    assert reply["flow_type"] == "information_request"
    assert reply["required_fields"] == ["title"]
    assert reply["collected_information"] == {}
    status, reply = agent.send("information_response", "Why gyokuro is shaded")
    assert reply["flow_type"] == "execution_result"
    assert reply["result"] == {"title": "Why gyokuro is shaded"}


def test_a_refusal_the_client_can_fix_asks_again(client, demo_content):
    booking = tasting_booking()
    sunday = datetime.date.fromisoformat(booking["date"])
    while sunday.weekday() != 6:
        sunday += datetime.timedelta(days=1)
    agent = Agent(client, secret=key())
    agent.send("intent_request", "Book a teaware-consultation")
    status, reply = agent.send(
        "information_response", "x", collected_information={"date": sunday.isoformat(), "time": "11:00",
                                                             "name": "Ada", "email": "ada@example.com"})  # fmt: skip
    assert status == 200, reply
    assert reply["flow_type"] == "information_request"
    assert "Tuesday to Saturday" in reply["message"]
    assert reply["required_fields"] == ["date"]  # the day is what to change, not the time
    assert "date" not in reply["collected_information"]
    # Invalid values are named and asked again; nothing collected before is lost.
    status, reply = agent.send(
        "information_response", "y", collected_information={"date": booking["date"], "time": "25:99"}
    )
    assert reply["required_fields"] == ["time"]
    assert "25:99" in reply["message"]
    assert reply["collected_information"]["name"] == "Ada"
    # Unknown fields are refused with their names.
    status, reply = agent.send("information_response", "z", collected_information={"colour": "green"})
    assert status == 400
    assert reply["fields"] == ["collected_information.colour"]


def test_an_action_needs_credentials_and_a_refusal_stores_nothing(client, demo_content):
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Book a tea-tasting on Saturday")
    assert status == 401
    assert reply["flow_type"] == "error"
    assert reply["status"] == "auth_required"
    assert not Interaction.objects.filter(interaction_id=agent.interaction_id).exists()
    agent.secret = key()
    status, reply = agent.send("intent_request", "Book a tea-tasting on Saturday")
    assert status == 200
    assert reply["flow_type"] == "information_request"
    narrow = Agent(client, secret=key(scopes=["reports"]))
    status, reply = narrow.send("intent_request", "Book a tea-tasting on Saturday")
    assert status == 403
    assert reply["status"] == "forbidden"


def test_an_ambiguous_intent_gets_a_clarification_and_the_answer_chooses(client, demo_content, settings):
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every capability is close
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I need something from the shop")
    assert status == 200
    assert reply["flow_type"] == "clarification_request"
    names = [option["name"] for option in reply["options"]]
    assert {"check_inventory", "book_appointment"} <= set(names)
    number = names.index("check_inventory") + 1
    status, reply = agent.send("information_response", str(number))
    assert reply["flow_type"] == "information_request"
    assert reply["required_fields"] == ["product"]
    status, reply = agent.send("information_response", "LK-TEA-0001")
    assert reply["flow_type"] == "execution_result"
    assert reply["result"]["sku"] == "LK-TEA-0001"
    assert "Chosen by the client" in reply["explicability"][0]["routing_logic"]


def test_an_async_intent_is_accepted_and_reported_until_it_ends(client, demo_content):
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I'd like to speak to a person about a custom blend")
    assert status == 200, reply
    assert reply["flow_type"] == "information_response"
    assert reply["status"] == "accepted"
    job = Job.objects.get(pk=reply["external_id"])
    assert job.capability == "escalate_to_human"
    assert job.protocol == "intentweb"
    run_job(job.pk)  # what the Celery task does: the desk's capability puts the request on the desk
    status, reply = agent.send("information_request", "Any news?")
    assert reply["status"] == "pending"
    complete_waiting(job.pk, operator_outcome("We can blend it for you: 250 g minimum.", "Mira"))
    status, reply = agent.send("information_request", "Any news?")
    assert reply["flow_type"] == "execution_result"
    assert reply["status"] == "completed"
    assert "250 g minimum" in reply["message"]
    assert Interaction.objects.get(interaction_id=agent.interaction_id).status == Interaction.Status.DONE


def test_an_interaction_whose_job_was_purged_ends_with_an_error(client, demo_content):
    agent = Agent(client, secret=key())
    _, reply = agent.send("intent_request", "I'd like to speak to a person about a custom blend")
    Job.objects.filter(pk=reply["external_id"]).delete()  # what the retention purge does to old jobs
    status, reply = agent.send("information_request", "Any news?")
    assert status == 410
    assert reply["flow_type"] == "error"
    assert reply["status"] == "expired"
    assert Interaction.objects.get(interaction_id=agent.interaction_id).status == Interaction.Status.FAILED


# --- the rules of §3.4 -----------------------------------------------------------------------------------------------


def test_flow_rules(client, demo_content):
    agent = Agent(client)
    agent.query_hash = "0" * 64
    status, reply = agent.send("information_response", "hello")  # no intent_request first
    assert status == 400
    assert reply["status"] == "unknown_interaction"
    agent3 = Agent(client, secret=key())
    agent3.send("intent_request", "Track my order")
    status, reply = agent3.send("intent_request", "Track my order again")
    assert status == 409
    assert reply["status"] == "interaction_started"
    status, reply = agent3.send("execution_result", "done")
    assert status == 400
    assert reply["status"] == "invalid_flow"
    wrong = agent3.envelope("information_response", "LK-10001")
    wrong["attribution"]["query_hash"] = "0" * 64
    status, reply = agent3.post(wrong)
    assert status == 400
    assert reply["status"] == "query_hash_mismatch"
    # Another client may not continue it.
    intruder = Agent(client, secret=key())
    intruder.interaction_id, intruder.query_hash = agent3.interaction_id, agent3.query_hash
    status, reply = intruder.send("information_response", "LK-10001")
    assert status == 409
    assert reply["status"] == "interaction_in_use"
    # The client's error ends it.
    status, reply = agent3.send("error", "The user changed their mind.")
    assert status == 200
    assert reply["flow_type"] == "error"
    assert reply["status"] == "closed"
    status, reply = agent3.send("information_response", "LK-10001")
    assert status == 409
    assert reply["status"] == "interaction_closed"


def test_a_first_message_must_hash_to_its_query_hash(client, demo_content):
    agent = Agent(client)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    body["message"] = "Is LK-TEA-0002 in stock?"  # changed after hashing and signing
    status, reply = agent.post(body)
    assert status == 400
    assert reply["status"] == "query_hash_mismatch"
    assert reply["fields"] == ["attribution.query_hash"]


def test_replayed_nonces_and_stale_timestamps_are_refused(client, demo_content):
    agent = Agent(client)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    status, _ = agent.post(body)
    assert status == 200
    status, reply = agent.post(body)
    assert status == 401
    assert reply["flow_type"] == "error"
    assert reply["status"] == "replayed_nonce"
    late = Agent(client)
    status, reply = late.send("intent_request", "Is LK-TEA-0001 in stock?", timestamp=now(-3600))
    assert status == 401
    assert reply["status"] == "stale_timestamp"
    status, reply = late.send("intent_request", "Is LK-TEA-0001 in stock?", timestamp=now(+3600))
    assert status == 401
    assert not Interaction.objects.filter(interaction_id=late.interaction_id).exists()


def test_chain_entries_of_registered_actors_must_verify(client, demo_content):
    agent = Agent(client, actor_id="https://assistant.example/v2")
    TrustedActorKey.objects.create(actor_id=agent.actor_id, public_key=agent.public_key, label="Assistant v2")
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200
    assert "verified with its registered key" in reply["explicability"][0]["assumptions"][0]
    forger = Agent(client, actor_id="https://assistant.example/v2")  # same actor_id, another key
    status, reply = forger.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 401
    assert reply["status"] == "signature_invalid"
    assert reply["fields"] == ["attribution.chain.0.signature"]


def test_an_operators_key_change_applies_to_the_next_message(client, demo_content):
    """Keys are read for every message (no per-process copy): added, changed, deactivated, each counts at once."""
    actor = "https://assistant.example/v3"
    agent = Agent(client, actor_id=actor)
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200
    assert "not verified" in reply["explicability"][0]["assumptions"][0]
    registered = TrustedActorKey.objects.create(actor_id=actor, public_key=Agent(client).public_key)  # another key
    status, reply = Agent(client, actor_id=actor).send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["status"]) == (401, "signature_invalid")
    registered.public_key = agent.public_key  # changed to the agent's key
    registered.save()
    again = Agent(client, actor_id=actor)
    again.private_key = agent.private_key
    status, reply = again.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200
    assert "verified with its registered key" in reply["explicability"][0]["assumptions"][0]
    registered.active = False
    registered.save()
    status, reply = Agent(client, actor_id=actor).send("intent_request", "Is LK-TEA-0001 in stock?")
    assert status == 200
    assert "not verified" in reply["explicability"][0]["assumptions"][0]


def test_a_refused_message_spends_neither_its_nonce_nor_a_turn(client, demo_content):
    agent = Agent(client, secret=key())
    body = agent.envelope("intent_request", "I'd like to book a tea-tasting in the shop", nonce="nonce-kept-0001")
    wrong = {**body, "message": "I'd like to book a teaware-consultation"}  # no longer hashes to its query_hash
    status, reply = agent.post(wrong)
    assert (status, reply["status"]) == (400, "query_hash_mismatch")
    status, reply = agent.post(body)  # the refused message's nonce is still unspent
    assert (status, reply["flow_type"]) == (200, "information_request")
    turns = Interaction.objects.get(interaction_id=agent.interaction_id).turns
    status, reply = agent.send("execution_result", "done", nonce="nonce-kept-0002")
    assert (status, reply["status"]) == (400, "invalid_flow")
    status, reply = agent.send("information_response", "hello", nonce="nonce-kept-0002")
    assert (status, reply["flow_type"]) == (200, "information_request")
    assert Interaction.objects.get(interaction_id=agent.interaction_id).turns == turns + 1
    status, reply = agent.send("information_response", "hello", nonce="nonce-kept-0002")
    assert (status, reply["status"]) == (401, "replayed_nonce")
    assert Interaction.objects.get(interaction_id=agent.interaction_id).turns == turns + 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"protocol_version": "1.0"},
        {"protocol_version": "2.0", "flow_type": "intent_request", "message": "x", "interaction_id": "a",
         "attribution": {"query_hash": "0" * 64, "nonce": "n" * 16, "timestamp": "2026-01-01T00:00:00Z",
                         "chain": []}},
        {"protocol_version": "1.0", "flow_type": "shout", "message": "x", "interaction_id": "a",
         "attribution": {"query_hash": "0" * 64, "nonce": "n" * 16, "timestamp": "2026-01-01T00:00:00Z",
                         "chain": []}},
        {"protocol_version": "1.0", "flow_type": "intent_request", "message": "x", "interaction_id": "a",
         "attribution": {"query_hash": "0" * 64, "nonce": "n" * 16, "timestamp": "yesterday", "chain": []}},
    ],
)  # fmt: skip
def test_malformed_envelopes_get_an_error_envelope(client, body):
    agent = Agent(client)
    status, reply = agent.post(body)
    assert status == 400
    assert reply["flow_type"] == "error"
    assert reply["status"] == "invalid_request"
    response = client.post("/intent", b"{not json", content_type="application/json")
    assert response.status_code == 400
    agent.check(response.json())


@pytest.mark.parametrize(
    ("field", "value"),
    [("interaction_id", "a" * 128 + "\n"), ("nonce", "n" * 128 + "\n")],
)  # fmt: skip
def test_an_id_or_nonce_over_its_length_is_refused_not_failed(client, demo_content, field, value):
    """Python's ``$`` matches before a final newline, so the pattern alone let 129 characters through to a column of
    128 (a 500)."""
    agent = Agent(client)
    if field == "interaction_id":
        agent.interaction_id = value
        body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?")
    else:
        body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?", nonce=value)
    status, reply = agent.post(body)
    assert (status, reply["status"]) == (400, "invalid_request"), reply
    assert reply["fields"] == [field if field == "interaction_id" else f"attribution.{field}"]
    assert not Interaction.objects.exists()


def test_a_verified_entry_signed_long_ago_is_stale(client, demo_content):
    """The signature covers the entry's timestamp, not attribution.timestamp: a message captured and sent again
    once its nonce is forgotten (after twice INTENT_MAX_SKEW), with a new attribution.timestamp, is refused."""
    agent = Agent(client, actor_id="https://assistant.example/replayed")
    TrustedActorKey.objects.create(actor_id=agent.actor_id, public_key=agent.public_key)
    body = agent.envelope("intent_request", "Is LK-TEA-0001 in stock?", timestamp=now(-3600))
    body["attribution"]["timestamp"] = body["timestamp"] = now()  # not signed: anyone can change it
    status, reply = agent.post(body)
    assert (status, reply["status"]) == (401, "stale_timestamp"), reply
    assert reply["fields"] == ["attribution.chain.0.timestamp"]
    assert not Interaction.objects.filter(interaction_id=agent.interaction_id).exists()
    # An entry no key is registered for is not verified, so its time is not checked.
    unknown = Agent(client, actor_id="https://assistant.example/unregistered")
    body = unknown.envelope("intent_request", "Is LK-TEA-0001 in stock?", timestamp=now(-3600))
    body["attribution"]["timestamp"] = body["timestamp"] = now()
    status, reply = unknown.post(body)
    assert status == 200, reply


def test_a_malformed_idempotency_key_after_the_end_is_refused_not_failed(client, demo_content):
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["flow_type"]) == (200, "execution_result")
    status, reply = agent.send("information_response", "again", headers={"HTTP_IDEMPOTENCY_KEY": "retry\x001"})
    assert (status, reply["status"]) == (400, "invalid_request"), reply


def test_an_intent_to_a_site_that_offers_nothing_is_refused(client, demo_content, registries):
    """Not a clarification_request with no option to choose, asked again after every answer."""
    for capability in list(registries[1]):
        if capability.action_type:
            del registries[1]._capabilities[capability.name]
    agent = Agent(client)
    status, reply = agent.send("intent_request", "Is LK-TEA-0001 in stock?")
    assert (status, reply["flow_type"], reply["status"]) == (400, "error", "unknown_capability"), reply
    assert not Interaction.objects.exists()


def test_an_answer_to_a_list_that_has_changed_chooses_nothing(client, demo_content, registries, settings):
    """An answer of "2" names the second option listed; once the first is no longer offered, reading it against
    what remains would choose the third. The site lists what is on offer now and asks again."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every capability is close
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I need something from the shop")
    assert (status, reply["flow_type"]) == (200, "clarification_request")
    names = [option["name"] for option in reply["options"]]
    assert len(names) >= 3
    del registries[1]._capabilities[names[0]]  # no longer offered
    status, reply = agent.send("information_response", "2")
    assert (status, reply["flow_type"]) == (200, "clarification_request"), reply
    listed = [option["name"] for option in reply["options"]]
    assert sorted(listed) == sorted(names[1:])
    status, reply = agent.send("information_response", "1")
    assert reply["flow_type"] != "clarification_request", reply
    assert Interaction.objects.get(interaction_id=agent.interaction_id).capability == listed[0]


def test_a_clarification_asked_again_can_be_answered(client, demo_content, registries, settings):
    """When the capabilities a clarification offered are gone, the site lists those on offer now: an answer to
    that list chooses among them (it was read against the old, empty list, and the site asked again forever)."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ROUTING_MARGIN": 1.0}  # every capability is close
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I need something from the shop")
    assert (status, reply["flow_type"]) == (200, "clarification_request")
    only_title_lookup(registries[1])  # what was offered is gone; title_lookup is new
    status, reply = agent.send("information_response", "1")
    assert reply["flow_type"] == "clarification_request"
    assert [option["name"] for option in reply["options"]] == ["title_lookup"]
    status, reply = agent.send("information_response", "1")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    assert reply["required_fields"] == ["title"]


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_an_async_intents_callback_gets_the_signed_final_envelope(client, demo_content, version):
    """The envelope the interaction's next message would get, in the IntentWeb version the interaction was started
    in (§3.3: "Same as request"; the interaction kept none, and a 1.2 client's callback said 1.0)."""
    from tests.concierge.test_callbacks import Receiver
    from tests.intentweb.test_protocol_version import VersionedAgent

    receiver = Receiver().start()
    try:
        agent = VersionedAgent(client, version, secret=key())
        hook = receiver.url("/intent-hook")
        _, reply = agent.send("intent_request", "Can a person help me with a custom order?", callback_url=hook)
        assert (reply["status"], reply["protocol_version"]) == ("accepted", version), reply
        job = Job.objects.get(pk=reply["external_id"])
        assert job.callback_url == hook
        run_job(job.pk)
        complete_waiting(job.pk, operator_outcome("Yes: write to wholesale@lanternkettle.example.", "Mira"))
        deliver_callback(job.pk)  # what the Celery task does once the job is done
        (request,) = receiver.requests
        posted = json.loads(request["body"])
        agent.check(posted)  # a valid envelope, signed by the site
        assert posted["flow_type"] == "execution_result"
        assert posted["interaction_id"] == agent.interaction_id
        assert posted["attribution"]["query_hash"] == agent.query_hash
        assert posted["protocol_version"] == version
        assert "wholesale@lanternkettle.example" in posted["message"]
    finally:
        receiver.stop()


def test_the_page_checks_csrf_binds_interactions_to_the_session_and_has_only_its_scopes(demo_content):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/intent-ui/")
    assert page.status_code == 200
    assert b'<label for="message">' in page.content
    token = browser.cookies["csrftoken"].value

    def say(who, body, **headers):
        response = who.post("/intent-ui/message", json.dumps(body), content_type="application/json", **headers)
        return response.status_code, response.json()

    status, reply = say(browser, {"message": "Book a tea-tasting"})
    assert status == 403
    assert reply["status"] == "csrf_failed"
    status, reply = say(browser, {"message": "Book a tea-tasting"}, HTTP_X_CSRFTOKEN=token)
    assert status == 200, reply
    assert reply["flow_type"] == "information_request"  # INTENT_UI_SCOPES allows booking (tests/settings.py)
    interaction_id = reply["interaction_id"]
    # Another browser cannot continue it.
    other = Client(enforce_csrf_checks=True)
    other.get("/intent-ui/")
    status, reply = say(other, {"interaction_id": interaction_id, "message": "Ada"},
                        HTTP_X_CSRFTOKEN=other.cookies["csrftoken"].value)  # fmt: skip
    assert status == 403
    assert reply["status"] == "interaction_in_use"
    # Outside the page's scopes: order lookups need the "orders" scope the tests do not give it. The person, who has
    # no key, is offered what the page does, not refused for one.
    status, reply = say(browser, {"message": "Where is my order LK-10001? ada@example.com"}, HTTP_X_CSRFTOKEN=token)
    assert status == 200, reply
    assert reply["flow_type"] == "clarification_request", reply
    assert "order_status" not in {option["name"] for option in reply["options"]}
    # "close" is a boolean: the string "false" does not end the interaction, it is refused.
    status, reply = say(browser, {"interaction_id": interaction_id, "message": "Ada", "close": "false"},
                        HTTP_X_CSRFTOKEN=token)  # fmt: skip
    assert status == 400
    assert reply["status"] == "invalid_request", reply
    status, reply = say(browser, {"interaction_id": interaction_id, "message": "Ada"}, HTTP_X_CSRFTOKEN=token)
    assert status == 200
    assert reply["flow_type"] != "error", reply  # still open


def test_the_page_keeps_a_bounded_session(demo_content, settings):
    """The page remembers at most MAX_SESSION_INTERACTIONS interactions per browser session, hashes included."""
    from django.test import Client

    from agent_handshake.intentweb.page import MAX_SESSION_INTERACTIONS, SESSION_KEY

    unlimited = {"requests": "100000/minute"}
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE,
                                "RATE_LIMITS": {"unauthenticated": unlimited, "authenticated": unlimited}}  # fmt: skip
    browser = Client()
    for _ in range(MAX_SESSION_INTERACTIONS + 5):
        response = browser.post("/intent-ui/message", json.dumps({"message": " "}), content_type="application/json")
        assert response.status_code == 400  # an empty intent, refused: the cheapest way to start one
    session = browser.session
    kept = session[SESSION_KEY]
    assert len(kept) == MAX_SESSION_INTERACTIONS
    hashes = [name for name, _ in session.items() if name.startswith(f"{SESSION_KEY}:")]
    assert sorted(hashes) == sorted(f"{SESSION_KEY}:{interaction_id}" for interaction_id in kept)


def test_interactions_past_their_retention_are_deleted(client, demo_content):
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    old, recent = Agent(client), Agent(client)
    old.send("intent_request", "Is LK-TEA-0001 in stock?")
    recent.send("intent_request", "Is LK-TEA-0002 in stock?")
    long_ago = timezone.now() - datetime.timedelta(days=8)
    Interaction.objects.filter(interaction_id=old.interaction_id).update(updated_at=long_ago)
    out = StringIO()
    call_command("agent_cleanup_sessions", stdout=out)
    assert "Deleted 1 expired interaction." in out.getvalue()
    assert list(Interaction.objects.values_list("interaction_id", flat=True)) == [recent.interaction_id]
