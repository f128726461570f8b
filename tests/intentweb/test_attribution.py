"""The IntentWeb attribution profile, its published test vectors, and the site's own key pair.

The vectors are re-derived here from hashlib, rfc8785 and cryptography directly, not through our module: a test
that checked our code against itself would pass with any profile, including a wrong one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import time
from io import StringIO

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.signals import setting_changed
from django.test import override_settings

from agent_handshake.identity import site_key
from agent_handshake.intentweb import attribution, vectors
from tests.processes import run_together

DID_PREFIX = "did:agent-semantic-protocol:"
INITIAL = ("protocol_version", "flow_type", "message", "interaction_id")


def raw_public(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def unb64url(text: str) -> bytes:
    assert "=" not in text
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pem_of(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def reset_site_key_cache() -> None:
    """What ``override_settings`` sends when AGENT_HANDSHAKE changes."""
    setting_changed.send(sender=type(settings._wrapped), setting="AGENT_HANDSHAKE", value=None, enter=False)


# The published vectors


@pytest.fixture(scope="module")
def published():
    return json.loads(vectors.PATH.read_text(encoding="utf-8"))


def test_vectors_file_is_what_build_gives(published):
    assert published == vectors.build()
    assert vectors.PATH.read_text(encoding="utf-8") == json.dumps(published, indent=2, ensure_ascii=False) + "\n"
    assert published["profile"] == attribution.PROFILE
    assert "RFC 8785" in published["description"]


def test_vector_actors_rederived(published):
    actors = published["actors"]
    assert bytes.fromhex(actors["agent"]["seed_hex"]) == bytes(range(32))
    assert bytes.fromhex(actors["site"]["seed_hex"]) == bytes(range(32, 64))
    for actor in actors.values():
        raw = raw_public(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(actor["seed_hex"])))
        assert actor["public_key_hex"] == raw.hex()
        assert actor["public_key_b64url"] == b64url(raw)
        assert actor["did"] == DID_PREFIX + hashlib.sha256(raw).hexdigest()
    assert len({actor["public_key_hex"] for actor in actors.values()}) == 3


def test_vector_interactions_rederived(published):
    actors = published["actors"]
    assert {message["envelope"]["flow_type"] for i in published["interactions"] for message in i["messages"]} >= {
        "intent_request",
        "information_request",
    }
    signers_seen = set()
    naive_differs = False
    for interaction in published["interactions"]:
        initial = interaction["messages"][0]["envelope"]
        assert initial["flow_type"] == "intent_request"
        fields = {name: initial[name] for name in INITIAL}
        canonical = rfc8785.dumps(fields)
        assert interaction["canonical_initial"].encode("utf-8") == canonical
        assert interaction["query_hash"] == hashlib.sha256(canonical).hexdigest()
        naive_differs |= json.dumps(fields, sort_keys=True, separators=(",", ":")).encode() != canonical
        for message in interaction["messages"]:
            envelope = message["envelope"]
            assert envelope["interaction_id"] == initial["interaction_id"]
            attributed = envelope["attribution"]
            assert attributed["query_hash"] == interaction["query_hash"]
            assert attributed["nonce"] == message["nonce"]
            assert len(attributed["chain"]) == len(message["signatures"]) > 0
            for entry, signed in zip(attributed["chain"], message["signatures"], strict=True):
                actor = actors[signed["signer"]]
                signers_seen.add(signed["signer"])
                assert (entry["actor_type"], entry["actor_id"]) == (actor["actor_type"], actor["actor_id"])
                payload = rfc8785.dumps(
                    {
                        "query_hash": attributed["query_hash"],
                        "nonce": attributed["nonce"],
                        "timestamp": entry["timestamp"],
                        "actor_id": entry["actor_id"],
                    }
                )
                assert signed["signed_payload"].encode("utf-8") == payload
                assert signed["signature"] == entry["signature"]
                signature = unb64url(entry["signature"])
                assert len(signature) == 64
                public = Ed25519PublicKey.from_public_bytes(bytes.fromhex(actor["public_key_hex"]))
                public.verify(signature, payload)  # raises InvalidSignature if it does not verify
                seed = bytes.fromhex(actor["seed_hex"])
                assert Ed25519PrivateKey.from_private_bytes(seed).sign(payload) == signature
                assert attribution.verify_entry(
                    entry, query_hash=attributed["query_hash"], nonce=attributed["nonce"], public_key=public
                )
    assert signers_seen == {"agent", "gateway", "site"}
    # At least one message is one a plain json.dumps would get wrong: the vectors catch a non-JCS implementation.
    assert naive_differs


def test_vector_messages_exercise_jcs(published):
    messages = [i["messages"][0]["envelope"]["message"] for i in published["interactions"]]
    assert "Book a table for 2 at 19:30, café terrace" in messages
    assert any("\n" in message and '"' in message and any(ord(c) > 0xFFFF for c in message) for message in messages)


def test_invalid_vectors_fail(published):
    assert len(published["invalid"]) >= 5
    for case in published["invalid"]:
        public = Ed25519PublicKey.from_public_bytes(unb64url(case["public_key_b64url"]))
        entry = case["entry"]
        payload = rfc8785.dumps(
            {
                "actor_id": entry["actor_id"],
                "nonce": case["nonce"],
                "query_hash": case["query_hash"],
                "timestamp": entry["timestamp"],
            }
        )
        with pytest.raises(InvalidSignature):
            public.verify(unb64url(entry["signature"]), payload)
        assert not attribution.verify_entry(
            entry, query_hash=case["query_hash"], nonce=case["nonce"], public_key=public
        ), case["why"]


# The profile


def test_profile_names_the_choices():
    assert attribution.PROFILE["name"] == "ahp-intentweb-ed25519-jcs-v1"
    assert attribution.PROFILE["signature"] == "Ed25519"
    assert attribution.PROFILE["encoding"] == "base64url without padding"
    assert "RFC 8785" in attribution.PROFILE["query_hash"]
    assert "RFC 8785" in attribution.PROFILE["signed"]


@pytest.fixture
def signed():
    private_key = Ed25519PrivateKey.generate()
    hashed = hashlib.sha256(b"intent").hexdigest()
    entry = attribution.sign_entry(
        private_key,
        actor_type="ai_agent",
        actor_id="agent-1",
        query_hash=hashed,
        nonce="nonce-0001",
        timestamp="2025-10-15T19:23:41Z",
    )
    return private_key, hashed, entry


def test_sign_entry_is_the_profile(signed):
    private_key, hashed, entry = signed
    assert set(entry) == {"actor_type", "actor_id", "timestamp", "signature"}
    assert entry["actor_type"] == "ai_agent"
    payload = rfc8785.dumps(
        {"actor_id": "agent-1", "nonce": "nonce-0001", "query_hash": hashed, "timestamp": "2025-10-15T19:23:41Z"}
    )
    assert (
        attribution.signed_payload(
            query_hash=hashed, nonce="nonce-0001", timestamp="2025-10-15T19:23:41Z", actor_id="agent-1"
        )
        == payload
    )
    private_key.public_key().verify(unb64url(entry["signature"]), payload)
    assert attribution.verify_entry(entry, query_hash=hashed, nonce="nonce-0001", public_key=private_key.public_key())


def test_verify_entry_refuses_changes(signed):
    private_key, hashed, entry = signed
    public = private_key.public_key()
    other_hash = hashlib.sha256(b"another intent").hexdigest()
    assert not attribution.verify_entry(entry, query_hash=hashed, nonce="nonce-0002", public_key=public)
    assert not attribution.verify_entry(entry, query_hash=other_hash, nonce="nonce-0001", public_key=public)
    changed_time = {**entry, "timestamp": "2025-10-15T19:23:42Z"}
    assert not attribution.verify_entry(changed_time, query_hash=hashed, nonce="nonce-0001", public_key=public)
    changed_actor = {**entry, "actor_id": "agent-2"}
    assert not attribution.verify_entry(changed_actor, query_hash=hashed, nonce="nonce-0001", public_key=public)
    wrong_key = Ed25519PrivateKey.generate().public_key()
    assert not attribution.verify_entry(entry, query_hash=hashed, nonce="nonce-0001", public_key=wrong_key)


def test_verify_entry_refuses_garbage_without_raising(signed):
    private_key, hashed, entry = signed
    public = private_key.public_key()
    signature = unb64url(entry["signature"])
    flipped = bytes([signature[0] ^ 1]) + signature[1:]
    standard_alphabet = base64.b64encode(signature).decode()
    garbage = [
        "",
        "!!!!",
        "not base64url at all",
        b64url(signature[:63]),
        b64url(signature + b"\0"),
        b64url(flipped),
        entry["signature"] + "A",
        " " + entry["signature"],
        None,
        123,
        ["a"],
    ]
    if standard_alphabet.rstrip("=") != entry["signature"]:
        garbage.append(standard_alphabet)
    for value in garbage:
        changed = {**entry, "signature": value}
        assert not attribution.verify_entry(changed, query_hash=hashed, nonce="nonce-0001", public_key=public), value
    for bad_entry in (None, [], "entry", {}, {k: v for k, v in entry.items() if k != "signature"}):
        assert not attribution.verify_entry(bad_entry, query_hash=hashed, nonce="nonce-0001", public_key=public)
    for bad_nonce in (None, 5, "\ud800"):
        assert not attribution.verify_entry(entry, query_hash=hashed, nonce=bad_nonce, public_key=public)
    # A padded signature is the same bytes: accepted, since the profile says padding is optional on input.
    padded = entry["signature"] + "=" * (-len(entry["signature"]) % 4)
    assert padded != entry["signature"]
    assert attribution.verify_entry(
        {**entry, "signature": padded}, query_hash=hashed, nonce="nonce-0001", public_key=public
    )


def envelope(**changes):
    return {
        "protocol_version": "1.0",
        "flow_type": "intent_request",
        "message": "Book a table for 2",
        "interaction_id": "conv-1",
        **changes,
    }


def test_query_hash_is_sha256_of_jcs():
    body = envelope()
    expected = hashlib.sha256(rfc8785.dumps({name: body[name] for name in INITIAL})).hexdigest()
    assert attribution.query_hash(body) == expected
    assert attribution.query_hash(body) != attribution.query_hash(envelope(message="Book a table for 3"))
    assert attribution.query_hash(body) != attribution.query_hash(envelope(interaction_id="conv-2"))


def test_query_hash_ignores_key_order_and_other_fields():
    body = envelope()
    reordered = dict(reversed(list(body.items())))
    assert list(reordered) != list(body)
    with_more = {**reordered, "attribution": {"nonce": "x"}, "timestamp": "2025-10-15T19:23:41Z", "locale": "fr"}
    assert attribution.query_hash(body) == attribution.query_hash(reordered) == attribution.query_hash(with_more)


def test_jcs_key_order_and_number_formatting():
    assert attribution.canonical({"b": 2.0, "a": [1e2, "é"]}) == attribution.canonical({"a": [100, "é"], "b": 2})
    assert attribution.canonical({"b": 2.0, "a": [1e2, "é"]}) == '{"a":[100,"é"],"b":2}'.encode()
    # query_hash takes any JSON values in the four fields; 2.0 and 2 are the same JSON number.
    assert attribution.query_hash(envelope(message=2.0)) == attribution.query_hash(envelope(message=2))
    assert attribution.query_hash(envelope(message=2.5)) != attribution.query_hash(envelope(message=2))


# base64url and DIDs


def test_from_b64url_is_strict():
    data = bytes(range(256))[:35]
    text = b64url(data)
    assert site_key.b64url(data) == text
    assert site_key.from_b64url(text) == data
    assert site_key.from_b64url(text + "=" * (-len(text) % 4)) == data
    assert site_key.from_b64url("") == b""
    for bad in ["ab+/", "ab/c", "ab c", "abcde", "ab=", "ab===", "abc==", "ab=c", " abcd", "AB", "é", None, b"abcd"]:
        with pytest.raises(ValueError, match="base64url"):
            site_key.from_b64url(bad)
    assert site_key.from_b64url("AA") == b"\0"


def test_public_key_from_b64url():
    private_key = Ed25519PrivateKey.generate()
    raw = raw_public(private_key)
    public = site_key.public_key_from_b64url(b64url(raw))
    assert raw_public_of(public) == raw
    for bad in [b64url(raw[:31]), b64url(raw + b"\0"), "***", ""]:
        with pytest.raises(ValueError, match=r"32 bytes|base64url"):
            site_key.public_key_from_b64url(bad)


def raw_public_of(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_did_of():
    raw = bytes(range(32))
    assert site_key.did_of(raw) == DID_PREFIX + hashlib.sha256(raw).hexdigest()
    with pytest.raises(ValueError, match="32 bytes"):
        site_key.did_of(raw[:31])


# The site key


def test_site_key_file_created_private_and_stable(tmp_path):
    path = tmp_path / "keys" / "k.pem"
    with override_settings(AGENT_HANDSHAKE={"SITE_KEY_FILE": str(path)}):
        assert site_key.key_location() == str(path)
        first = site_key.site_public_key_bytes()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        on_disk = serialization.load_pem_private_key(path.read_bytes(), password=None)
        assert isinstance(on_disk, Ed25519PrivateKey)
        assert raw_public(on_disk) == first
        assert sorted(p.name for p in path.parent.iterdir()) == ["k.pem"]  # no temporary file left behind
        assert site_key.site_public_key_bytes() == first
        reset_site_key_cache()
        assert site_key.site_public_key_bytes() == first  # read back from the file

        # The key is cached until the setting changes, and read again after.
        replacement = Ed25519PrivateKey.generate()
        path.write_bytes(pem_of(replacement))
        assert site_key.site_public_key_bytes() == first
        reset_site_key_cache()
        assert site_key.site_public_key_bytes() == raw_public(replacement)
        assert site_key.site_public_key() == b64url(raw_public(replacement))


RACE = """
import sys, time
from django.conf import settings
settings.configure(AGENT_HANDSHAKE={"SITE_KEY_FILE": sys.argv[1]})
from agent_handshake.identity.site_key import load_site_key, site_public_key
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
loaded = load_site_key()
print(loaded.created, site_public_key())
"""


def test_processes_starting_together_end_with_one_key(tmp_path):
    path = tmp_path / "race" / "k.pem"
    start = time.time() + 4
    results = []
    for worker in run_together(RACE, str(path), str(start)):
        assert worker.returncode == 0, worker.stderr
        created, public = worker.stdout.split()
        results.append((created, public))
    on_disk = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert {public for _, public in results} == {b64url(raw_public(on_disk))}
    assert [created for created, _ in results].count("True") == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.pem"]


def test_default_key_file_under_base_dir(tmp_path):
    with override_settings(BASE_DIR=tmp_path, AGENT_HANDSHAKE={}):
        expected = tmp_path / ".agent_handshake" / "site-ed25519.pem"
        assert site_key.key_location() == str(expected)
        public = site_key.site_public_key_bytes()
        assert raw_public(serialization.load_pem_private_key(expected.read_bytes(), password=None)) == public


def test_default_key_file_in_working_directory(tmp_path, monkeypatch):
    assert not hasattr(settings, "BASE_DIR")
    monkeypatch.chdir(tmp_path)
    with override_settings(AGENT_HANDSHAKE={}):
        site_key.site_private_key()
        assert (tmp_path / ".agent_handshake" / "site-ed25519.pem").is_file()


def test_site_private_key_setting_as_pem(tmp_path):
    private_key = Ed25519PrivateKey.generate()
    key_file = tmp_path / "unused.pem"
    with override_settings(
        AGENT_HANDSHAKE={"SITE_PRIVATE_KEY": pem_of(private_key).decode(), "SITE_KEY_FILE": str(key_file)}
    ):
        assert site_key.site_public_key_bytes() == raw_public(private_key)
        assert site_key.key_location() == "the SITE_PRIVATE_KEY setting"
    assert not key_file.exists()  # the setting wins over the file


@pytest.mark.parametrize("padded", [False, True])
def test_site_private_key_setting_as_base64url_seed(padded):
    seed = hashlib.sha256(b"a seed").digest()
    text = b64url(seed) + ("=" if padded else "")
    expected = raw_public(Ed25519PrivateKey.from_private_bytes(seed))
    with override_settings(AGENT_HANDSHAKE={"SITE_PRIVATE_KEY": text + "\n"}):
        assert site_key.site_public_key_bytes() == expected
        assert site_key.site_public_key() == b64url(expected)
        assert site_key.site_did() == DID_PREFIX + hashlib.sha256(expected).hexdigest()
        data = b"signed by the site"
        Ed25519PublicKey.from_public_bytes(expected).verify(site_key.sign(data), data)


def malformed_values():
    seed_31 = b64url(hashlib.sha256(b"short").digest()[:31])
    standard = base64.b64encode(bytes([251, 255]) * 16).decode()  # "+" and "/" are not base64url
    not_ed25519 = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    broken_pem = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXNlY3JldC1zZWNyZXQ=\n-----END PRIVATE KEY-----\n"
    return [
        ("hunter2-secret-value!", "hunter2", "neither"),
        (seed_31, seed_31, "31 bytes"),
        (standard, standard[:20], "neither"),
        (not_ed25519.decode(), not_ed25519.decode().splitlines()[1], "not an Ed25519"),
        (broken_pem, "c2VjcmV0LXNlY3JldC1zZWNyZXQ", "not a readable PEM"),
        (42, "42", "must be a string"),
    ]


# Named ids: the P-256 key is generated anew at each collection, and pytest-xdist's workers must collect the same tests.
@pytest.mark.parametrize(
    ("value", "secret_part", "reason"),
    malformed_values(),
    ids=["neither-form", "31-bytes", "standard-base64", "p256-pem", "unreadable-pem", "not-a-string"],
)
def test_malformed_site_private_key(value, secret_part, reason):
    with override_settings(AGENT_HANDSHAKE={"SITE_PRIVATE_KEY": value}), pytest.raises(ImproperlyConfigured) as raised:
        site_key.site_private_key()
    message = str(raised.value)
    assert "SITE_PRIVATE_KEY" in message
    assert reason in message
    if isinstance(value, str):
        assert value.strip() not in message
    assert secret_part not in message


def test_malformed_key_file(tmp_path):
    path = tmp_path / "k.pem"
    path.write_text("not a key\n")
    with override_settings(AGENT_HANDSHAKE={"SITE_KEY_FILE": str(path)}), pytest.raises(ImproperlyConfigured) as raised:
        site_key.site_private_key()
    assert "SITE_KEY_FILE" in str(raised.value)
    assert str(path) in str(raised.value)
    assert path.read_text() == "not a key\n"  # never replaced by a new key


# The management command


def test_agent_site_key_command_creates_and_reports(tmp_path):
    path = tmp_path / "site" / "k.pem"
    with override_settings(AGENT_HANDSHAKE={"SITE_KEY_FILE": str(path)}):
        out = StringIO()
        call_command("agent_site_key", stdout=out)
        raw = raw_public(serialization.load_pem_private_key(path.read_bytes(), password=None))
        did = DID_PREFIX + hashlib.sha256(raw).hexdigest()
        text = out.getvalue()
        assert did in text
        assert b64url(raw) in text
        assert str(path) in text
        assert "created" in text
        again = StringIO()
        call_command("agent_site_key", stdout=again)
        assert did in again.getvalue()
        assert "created" not in again.getvalue()


def test_agent_site_key_command_with_setting_never_prints_it():
    seed = hashlib.sha256(b"command seed").digest()
    with override_settings(AGENT_HANDSHAKE={"SITE_PRIVATE_KEY": b64url(seed)}):
        out = StringIO()
        call_command("agent_site_key", stdout=out)
    raw = raw_public(Ed25519PrivateKey.from_private_bytes(seed))
    assert DID_PREFIX + hashlib.sha256(raw).hexdigest() in out.getvalue()
    assert "the SITE_PRIVATE_KEY setting" in out.getvalue()
    assert b64url(seed) not in out.getvalue()
