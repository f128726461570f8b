"""The Agent Semantic Protocol front door (POST /agent/asp): framed protobuf, the mutual handshake, signed intents
answered by signed NegotiationResponses, malformed frames refused, and the interoperability vectors.

The agent here is written from the spec (§4 framing, the .proto) and the documented signed bytes: messages are
built with the generated classes, framed by hand with ``struct``, signed and verified with ``cryptography`` and
``hashlib`` directly; none of the server's helpers (framing, signing, DIDs) are used.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
import time
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.test import override_settings

from agent_handshake.asp import asp_pb2
from agent_handshake.models import TrustEvent, VerifiedAgent

pytestmark = pytest.mark.django_db

PREFIX = "did:agent-semantic-protocol:"
HANDSHAKE_DOMAIN = b"agent-handshake/asp-handshake/v1"
INTENT_DOMAIN = b"agent-handshake/asp-intent/v1\x00"
NEGOTIATION_DOMAIN = b"agent-handshake/asp-negotiation/v1\x00"
PROTOBUF = "application/x-protobuf"
TYPES = {asp_pb2.HandshakeMessage: 0x01, asp_pb2.IntentMessage: 0x02, asp_pb2.NegotiationResponse: 0x03,
         asp_pb2.WorkflowMessage: 0x04, asp_pb2.CapabilityAnnouncement: 0x05}  # fmt: skip
VECTORS = Path(__file__).resolve().parents[2] / "agent_handshake" / "asp" / "vectors.json"


def frame(message) -> bytes:
    payload = message.SerializeToString(deterministic=True)
    return struct.pack(">I", 1 + len(payload)) + bytes([TYPES[type(message)]]) + payload


def unframe(body: bytes):
    (length,) = struct.unpack(">I", body[:4])
    assert length == len(body) - 4
    cls = {number: cls for cls, number in TYPES.items()}[body[4]]
    return cls.FromString(body[5:])


def handshake_bytes(role: str, signer: str, peer: str, challenge: bytes) -> bytes:
    return b"\x00".join([HANDSHAKE_DOMAIN, role.encode(), signer.encode(), peer.encode(), challenge])


def message_bytes(domain: bytes, message) -> bytes:
    unsigned = type(message)()
    unsigned.CopyFrom(message)
    unsigned.ClearField("signature")
    return domain + unsigned.SerializeToString(deterministic=True)


def did_of(public: bytes) -> str:
    return PREFIX + hashlib.sha256(public).hexdigest()


def post(client, body: bytes, content_type: str = PROTOBUF, **headers):
    return client.post("/agent/asp", body, content_type=content_type, **headers)


def site_key(client) -> Ed25519PublicKey:
    identity = client.get("/.well-known/agent.json").json()["integrations"]["agent_identity"]
    raw = base64.urlsafe_b64decode(identity["public_key"] + "=" * (-len(identity["public_key"]) % 4))
    assert identity["did"] == did_of(raw)
    return Ed25519PublicKey.from_public_bytes(raw)


class Agent:
    def __init__(self, client):
        self.client = client
        self.key = Ed25519PrivateKey.generate()
        self.public = self.key.public_key().public_bytes_raw()
        self.did = did_of(self.public)
        self.token = ""

    def hello(self) -> asp_pb2.HandshakeMessage:
        return asp_pb2.HandshakeMessage(
            agent_id="proto-agent", did=self.did, capabilities=["shopping"], version="1.0.0",
            timestamp=time.time_ns(), public_key=self.public, challenge=secrets.token_bytes(32),
        )  # fmt: skip

    def handshake(self) -> asp_pb2.HandshakeMessage:
        hello = self.hello()
        response = post(self.client, frame(hello))
        assert response.status_code == 200, response.content
        assert response["Content-Type"] == PROTOBUF
        answer = unframe(response.content)
        assert isinstance(answer, asp_pb2.HandshakeMessage)
        # The site proves its key: its DID is its key's, and it signed our challenge, for us, as the responder.
        assert answer.did == did_of(answer.public_key)
        Ed25519PublicKey.from_public_bytes(answer.public_key).verify(
            answer.challenge_response, handshake_bytes("responder", answer.did, self.did, hello.challenge)
        )
        assert answer.version == "1.0.0"
        assert abs(answer.timestamp - time.time_ns()) < 60 * 10**9  # Unix nanoseconds
        assert answer.agent_id == "http://testserver/"
        assert "content_search" in answer.capabilities
        assert len(answer.challenge) == 32
        signature = self.key.sign(handshake_bytes("initiator", self.did, answer.did, answer.challenge))
        second = asp_pb2.HandshakeMessage(did=self.did, challenge=answer.challenge, challenge_response=signature)
        response = post(self.client, frame(second))
        assert response.status_code == 200, response.content
        credential = unframe(response.content)
        assert credential.access_token.startswith("asp_")
        assert credential.expires_in == 3600
        assert credential.did == answer.did
        assert credential.agent_id == answer.agent_id  # the site names itself, as in its first answer
        self.token = credential.access_token
        return credential

    def intent(self, payload: str, **fields) -> asp_pb2.IntentMessage:
        fields = {
            "id": secrets.token_hex(8),
            "did": self.did,
            "timestamp": time.time_ns(),
            "trust_score": 0.5,
            **fields,
        }
        message = asp_pb2.IntentMessage(payload=payload, **fields)
        message.signature = self.key.sign(message_bytes(INTENT_DOMAIN, message))
        return message


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert (body["status"], body["code"]) == ("error", code), body
    assert body["message"]
    return body


def test_the_framed_handshake_gives_a_credential_the_json_front_doors_accept(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    verified = VerifiedAgent.objects.get(did=agent.did)
    assert verified.agent_id == "proto-agent"
    converse = client.post(
        "/agent/converse",
        json.dumps({"ahp": "0.1", "capability": "content_search", "query": "How hot should the water be for gyokuro?"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.token}",
    )
    assert converse.status_code == 200, converse.json()
    assert TrustEvent.objects.filter(agent=verified).count() == 1  # the Bearer request was the agent's
    # The same answer cannot complete a second handshake: the challenge is spent.
    hello = agent.hello()
    answer = unframe(post(client, frame(hello)).content)
    signature = agent.key.sign(handshake_bytes("initiator", agent.did, answer.did, answer.challenge))
    second = frame(asp_pb2.HandshakeMessage(did=agent.did, challenge=answer.challenge, challenge_response=signature))
    assert post(client, second).status_code == 200
    error_of(post(client, second), 401, "unknown_handshake")


def test_a_handshake_with_a_wrong_signature_or_a_foreign_key_is_refused(client, demo_content):
    agent = Agent(client)
    hello = agent.hello()
    hello.did = PREFIX + "0" * 64
    error_of(post(client, frame(hello)), 401, "did_mismatch")
    hello = agent.hello()
    answer = unframe(post(client, frame(hello)).content)
    # Signing the raw challenge (upstream's way) is not our signed form.
    second = asp_pb2.HandshakeMessage(did=agent.did, challenge=answer.challenge,
                                      challenge_response=agent.key.sign(answer.challenge))  # fmt: skip
    body = error_of(post(client, frame(second)), 401, "signature_invalid")
    assert body["fields"] == ["challenge_response"]
    assert not VerifiedAgent.objects.filter(did=agent.did).exists()
    stale = agent.hello()
    stale.timestamp = time.time_ns() - 3600 * 10**9
    error_of(post(client, frame(stale)), 401, "stale_timestamp")


def test_a_signed_intent_is_answered_by_a_signed_negotiation_response(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    verified = VerifiedAgent.objects.get(did=agent.did)
    intent = agent.intent("How hot should the water be for gyokuro?", capabilities=["content_search"])
    response = post(client, frame(intent))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    assert response["X-RateLimit-Limit"]
    answer = unframe(response.content)
    assert isinstance(answer, asp_pb2.NegotiationResponse)
    # Signed by the key the manifest publishes, over our domain-separated form of the whole message.
    site_key(client).verify(answer.signature, message_bytes(NEGOTIATION_DOMAIN, answer))
    with pytest.raises(InvalidSignature):  # not upstream's request_id + reason
        site_key(client).verify(answer.signature, (answer.request_id + answer.reason).encode())
    assert answer.request_id == intent.id
    assert answer.accepted
    assert list(answer.workflow_steps) == ["content_search"]
    assert "°" in answer.reason or "degrees" in answer.reason.lower() or "60" in answer.reason, answer.reason
    assert answer.did == did_of(site_key(client).public_bytes_raw())
    assert answer.trust_delta == pytest.approx(0.05)
    assert abs(answer.timestamp - time.time_ns()) < 60 * 10**9
    # The request is the agent's: its trust moved, with its history row.
    verified.refresh_from_db()
    assert verified.trust == pytest.approx(0.55)
    assert TrustEvent.objects.filter(agent=verified).count() == 1
    # The same signed intent again is a replay.
    error_of(post(client, frame(intent)), 401, "replayed")


def test_an_intent_naming_no_capability_is_routed_and_an_action_points_to_json(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    routed = unframe(post(client, frame(agent.intent("What is the best water temperature for gyokuro tea?"))).content)
    assert routed.accepted, routed.reason
    assert list(routed.workflow_steps) == ["content_search"]
    action = unframe(
        post(client, frame(agent.intent("Book a tasting appointment", capabilities=["book_appointment"]))).content
    )
    assert not action.accepted
    assert "/agent/converse" in action.reason
    assert list(action.workflow_steps) == ["book_appointment"]
    site_key(client).verify(action.signature, message_bytes(NEGOTIATION_DOMAIN, action))
    missing = unframe(post(client, frame(agent.intent("Generate a sort function", capabilities=["code-gen"]))).content)
    assert not missing.accepted
    assert "code-gen" in missing.reason
    # §6.4: an accepted intent +0.05, one not accepted -0.02, as the response says and the site applies.
    assert (routed.trust_delta, action.trust_delta, missing.trust_delta) == pytest.approx((0.05, -0.02, -0.02))
    verified = VerifiedAgent.objects.get(did=agent.did)
    assert verified.trust == pytest.approx(0.5 + 0.05 - 0.02 - 0.02)
    reasons = list(TrustEvent.objects.filter(agent=verified).order_by("pk").values_list("reason", flat=True))
    assert [reason.endswith("(not accepted)") for reason in reasons] == [False, True, True]


def test_a_flood_of_intents_the_site_cannot_accept_lowers_trust(client, demo_content):
    """Intent flooding (the spec's §12): intents the site answers with accepted=false lower the agent's trust."""
    agent = Agent(client)
    agent.handshake()
    for _ in range(5):
        answer = unframe(post(client, frame(agent.intent("anything", capabilities=["code-gen"]))).content)
        assert not answer.accepted
    assert VerifiedAgent.objects.get(did=agent.did).trust == pytest.approx(0.5 - 5 * 0.02)


def test_an_intent_vector_of_the_site_models_dimensions_routes_the_intent(client, demo_content):
    from agent_handshake.retrieval.embeddings import get_embedding_backend

    agent = Agent(client)
    agent.handshake()
    backend = get_embedding_backend()  # the model the site publishes (all-MiniLM-L6-v2): the agent's own encoder
    question = [float(x) for x in backend.embed_query("How hot should the water be when brewing gyokuro green tea?")]
    by_payload = unframe(post(client, frame(agent.intent("Book a tasting appointment"))).content)
    assert list(by_payload.workflow_steps) == ["book_appointment"]
    by_vector = unframe(post(client, frame(agent.intent("Book a tasting appointment", intent_vector=question))).content)
    assert list(by_vector.workflow_steps) == ["content_search"]
    # A vector of another model's dimensions is not comparable: the payload decides.
    other = unframe(post(client, frame(agent.intent("Book a tasting appointment", intent_vector=question[:8]))).content)
    assert list(other.workflow_steps) == ["book_appointment"]


def test_unsigned_wrongly_signed_stale_and_unverified_intents_are_refused(client, demo_content):
    agent = Agent(client)
    agent.handshake()
    verified = VerifiedAgent.objects.get(did=agent.did)
    unsigned = agent.intent("gyokuro water temperature")
    unsigned.ClearField("signature")
    error_of(post(client, frame(unsigned)), 401, "signature_required")
    tampered = agent.intent("gyokuro water temperature")
    tampered.payload = "sencha water temperature"
    error_of(post(client, frame(tampered)), 401, "signature_invalid")
    upstream = agent.intent("gyokuro water temperature")
    upstream.signature = agent.key.sign((upstream.id + upstream.payload).encode())
    error_of(post(client, frame(upstream)), 401, "signature_invalid")
    other = Agent(client)  # a key that never completed a handshake here
    error_of(post(client, frame(other.intent("gyokuro water temperature"))), 401, "unverified_did")
    impostor = other.intent("gyokuro water temperature")
    impostor.did = agent.did  # the verified DID, signed by another key
    impostor.signature = other.key.sign(message_bytes(INTENT_DOMAIN, impostor))
    error_of(post(client, frame(impostor)), 401, "signature_invalid")
    stale = agent.intent("gyokuro water temperature", timestamp=time.time_ns() - 3600 * 10**9)
    error_of(post(client, frame(stale)), 401, "stale_timestamp")
    # A forgery never moves the agent's trust.
    assert not TrustEvent.objects.filter(agent=verified).exists()
    VerifiedAgent.objects.filter(pk=verified.pk).update(blocked=True)
    error_of(post(client, frame(agent.intent("gyokuro water temperature"))), 403, "blocked")


def test_a_nul_in_a_handshake_or_intent_string_is_refused_as_json(client, demo_content):
    """Protobuf strings may hold NUL, which no text column can: refused before the database sees it (was a 500)."""
    agent = Agent(client)
    hello = agent.hello()
    hello.agent_id = "proto\x00agent"
    assert error_of(post(client, frame(hello)), 400, "invalid_request")["fields"] == ["agent_id"]
    hello = agent.hello()
    hello.capabilities.append("shop\x00ping")
    assert error_of(post(client, frame(hello)), 400, "invalid_request")["fields"] == ["capabilities"]
    second = asp_pb2.HandshakeMessage(did=agent.did + "\x00", challenge=b"\x01" * 32, challenge_response=b"\x02" * 64)
    assert error_of(post(client, frame(second)), 400, "invalid_request")["fields"] == ["did"]
    agent.handshake()
    error_of(post(client, frame(agent.intent("gyokuro water temperature", did=agent.did + "\x00"))), 401,
             "unverified_did")  # fmt: skip


def test_an_intent_needs_the_scope_of_the_capability_it_is_answered_by(client, demo_content, registries, settings):
    """A question capability with a scope answers only agents whose tier (or own scopes) has it, as on AHP."""
    import agent_handshake
    from agent_handshake.concierge import answering
    from agent_handshake.registry import Capability

    agent_handshake.register_capability(
        Capability(name="members_search", description="Tasting notes for members.", mode="MODE2",
                   response_types=["text/answer"], scope="members", handler=answering.content_answer)
    )  # fmt: skip
    agent = Agent(client)
    agent.handshake()
    question = "How hot should the water be for gyokuro?"
    error_of(post(client, frame(agent.intent(question, capabilities=["members_search"]))), 403, "forbidden")
    tiers = [{"name": "members", "min_trust": 0.0, "rate_limits": "authenticated", "scopes": ["members"]}]
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "DID_TRUST_TIERS": tiers}):
        answer = unframe(post(client, frame(agent.intent(question, capabilities=["members_search"]))).content)
    assert answer.accepted, answer.reason
    assert list(answer.workflow_steps) == ["members_search"]


def test_the_framing_round_trips_every_message_type():
    from agent_handshake.asp import framing

    messages = [
        asp_pb2.HandshakeMessage(did=PREFIX + "ab" * 32, challenge=b"\x00" * 32, access_token="asp_x", expires_in=5),
        asp_pb2.IntentMessage(id="i", intent_vector=[0.5, -1.0], metadata={"b": "2", "a": "1"}, signature=b"s" * 64),
        asp_pb2.NegotiationResponse(request_id="i", accepted=True, workflow_steps=["a", "b"], signature=b"t" * 64),
        asp_pb2.WorkflowMessage(workflow_id="w", params={"k": "v"}, timestamp=7),
        asp_pb2.CapabilityAnnouncement(agent_id="a", capabilities=["x"], ttl=60),
        asp_pb2.HandshakeMessage(),  # an empty payload is a 5-byte frame
    ]
    for message in messages:
        encoded = framing.encode(message)
        assert encoded == frame(message)  # our hand-made frame and the server's agree, byte for byte
        kind, decoded = framing.decode(encoded)
        assert kind == TYPES[type(message)]
        assert decoded == message
    assert len(framing.encode(asp_pb2.HandshakeMessage())) == 5


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "frame_too_short"),
        (b"\x00\x00\x00\x01", "frame_too_short"),
        (struct.pack(">IB", 10, 0x01) + b"\x0a\x00", "frame_length_mismatch"),  # says 10, 3 follow
        (struct.pack(">IB", 1, 0x01) + b"\x0a\x00", "frame_length_mismatch"),  # two frames' worth: trailing bytes
        (struct.pack(">IB", 3, 0x09) + b"\x0a\x00", "unknown_message_type"),
        (struct.pack(">IB", 1, 0x00), "unknown_message_type"),
        (struct.pack(">IB", 3, 0x02) + b"\x0a\x05", "invalid_payload"),  # a string field cut short
        (struct.pack(">IB", 5, 0x01) + b"\x12\x02\xff\xfe", "invalid_payload"),  # did (a string) not UTF-8
        (struct.pack(">IB", 2, 0x02) + b"\x07", "invalid_payload"),  # wire type 7 does not exist
        (frame(asp_pb2.WorkflowMessage(workflow_id="w")), "unsupported_message_type"),
        (frame(asp_pb2.NegotiationResponse(request_id="x")), "unsupported_message_type"),
    ],
)
def test_a_malformed_frame_is_refused_as_json(client, body, code):
    error_of(post(client, body), 400, code)


def test_a_body_over_the_cap_or_of_another_type_is_refused(client):
    big = asp_pb2.IntentMessage(payload="x" * 9000)
    error_of(post(client, frame(big)), 413, "request_too_large")
    with override_settings(AGENT_HANDSHAKE={"MAX_REQUEST_BYTES": 100000}):
        error_of(post(client, frame(big)), 401, "signature_required")  # the cap is the setting's
    error_of(post(client, b'{"did": "x"}', content_type="application/json"), 415, "unsupported_media_type")
    response = client.get("/agent/asp")
    error_of(response, 405, "method_not_allowed")


def test_the_vectors_file_is_what_the_generator_builds():
    from agent_handshake.asp import vectors

    assert VECTORS.read_text(encoding="utf-8") == vectors.render()


def test_the_vectors_derive_from_their_seeds_independently():
    data = json.loads(VECTORS.read_text(encoding="utf-8"))
    keys = {}
    for name, key in data["keys"].items():
        private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(key["seed_hex"]))
        public = private.public_key().public_bytes_raw()
        assert public.hex() == key["public_key_hex"]
        assert key["did"] == PREFIX + hashlib.sha256(public).hexdigest()
        keys[name] = (private, public, key["did"])
    agent_key, agent_public, agent_did = keys["agent"]
    site_private, site_public, site_did = keys["site"]

    shake = data["handshake"]
    agent_challenge, site_challenge = (
        bytes.fromhex(shake["agent_challenge_hex"]),
        bytes.fromhex(shake["site_challenge_hex"]),
    )
    responder = handshake_bytes("responder", site_did, agent_did, agent_challenge)
    initiator = handshake_bytes("initiator", agent_did, site_did, site_challenge)
    assert shake["responder_signed_bytes_hex"] == responder.hex()
    assert shake["initiator_signed_bytes_hex"] == initiator.hex()
    assert shake["responder_signature_hex"] == site_private.sign(responder).hex()  # Ed25519 is deterministic
    assert shake["initiator_signature_hex"] == agent_key.sign(initiator).hex()
    frames = {name: unframe(bytes.fromhex(value)) for name, value in shake["frames"].items()}
    hello, answer = frames["agent_hello_hex"], frames["site_answer_hex"]
    assert (hello.did, hello.public_key, hello.challenge) == (agent_did, agent_public, agent_challenge)
    assert (answer.did, answer.public_key, answer.challenge) == (site_did, site_public, site_challenge)
    assert answer.challenge_response.hex() == shake["responder_signature_hex"]
    assert frames["agent_verify_hex"].challenge_response.hex() == shake["initiator_signature_hex"]
    assert frames["site_credential_hex"].access_token
    assert frames["site_credential_hex"].expires_in == 3600
    for name, value in shake["frames"].items():
        assert frame(frames[name]).hex() == value

    for section, cls, domain, (private, public, did) in [
        ("intent", asp_pb2.IntentMessage, INTENT_DOMAIN, keys["agent"]),
        ("negotiation", asp_pb2.NegotiationResponse, NEGOTIATION_DOMAIN, keys["site"]),
    ]:
        vector = data[section]
        message = cls.FromString(bytes.fromhex(vector["payload_hex"]))
        assert message.did == did
        assert frame(message).hex() == vector["frame_hex"]
        assert message.SerializeToString(deterministic=True).hex() == vector["payload_hex"]
        signed = message_bytes(domain, message)
        assert signed.hex() == vector["signed_bytes_hex"]
        assert message.signature.hex() == vector["signature_hex"] == private.sign(signed).hex()
        Ed25519PublicKey.from_public_bytes(public).verify(message.signature, signed)
    intent = asp_pb2.IntentMessage.FromString(bytes.fromhex(data["intent"]["payload_hex"]))
    assert intent.payload.endswith("🌱")
    assert dict(intent.metadata) == {"locale": "en", "client": "vector-agent"}
    response = asp_pb2.NegotiationResponse.FromString(bytes.fromhex(data["negotiation"]["payload_hex"]))
    assert response.request_id == intent.id

    # Upstream's signed bytes, beside ours: id + payload, request_id + reason.
    upstream = data["upstream"]
    assert bytes.fromhex(upstream["intent"]["signed_bytes_hex"]) == (intent.id + intent.payload).encode()
    assert (
        bytes.fromhex(upstream["negotiation"]["signed_bytes_hex"]) == (response.request_id + response.reason).encode()
    )
    for part, private in (("intent", agent_key), ("negotiation", site_private)):
        assert upstream[part]["signature_hex"] == private.sign(bytes.fromhex(upstream[part]["signed_bytes_hex"])).hex()
        assert upstream[part]["signature_hex"] != data[part]["signature_hex"]

    # Every invalid case fails verification.
    assert len(data["invalid"]) == 3
    for case in data["invalid"]:
        public = Ed25519PublicKey.from_public_bytes(keys[case["signer"]][1])
        if "frame_hex" in case:
            message = unframe(bytes.fromhex(case["frame_hex"]))
            signature, signed = message.signature, message_bytes(INTENT_DOMAIN, message)
        else:
            signature, signed = bytes.fromhex(case["signature_hex"]), bytes.fromhex(case["signed_bytes_hex"])
        with pytest.raises(InvalidSignature):
            public.verify(signature, signed)


def test_the_vectors_verify_on_the_server(client, demo_content):
    """The committed intent's signed bytes are the ones the server checks (its signature verifies there)."""
    data = json.loads(VECTORS.read_text(encoding="utf-8"))
    from agent_handshake.asp import signing

    intent = asp_pb2.IntentMessage.FromString(bytes.fromhex(data["intent"]["payload_hex"]))
    public = bytes.fromhex(data["keys"]["agent"]["public_key_hex"])
    assert signing.verify_message(intent, public)
    for case in data["invalid"][:2]:
        assert not signing.verify_message(unframe(bytes.fromhex(case["frame_hex"])), public)
