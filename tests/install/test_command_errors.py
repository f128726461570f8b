"""Management commands refuse what they cannot do with a CommandError (one line, no traceback), and refuse before
changing anything: agent_reindex's --batch-size bounds, agent_site_key --rotate where the key file cannot be
replaced, agent_insights_summary --email with no mail server to take it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command
from django.test import override_settings

from agent_handshake.models import Document, EmbeddingIndex, Passage, SiteKeyRecord
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


# --- agent_reindex --batch-size ---------------------------------------------------------------------------------


def index_state() -> tuple[dict, set, list]:
    documents = dict(
        Document.objects.filter(content_type=ContentType.objects.get_for_model(Article)).values_list(
            "object_id", "indexed_hash"
        )
    )
    passages = set(Passage.objects.values_list("pk", "document_id", "text"))
    models = list(EmbeddingIndex.objects.order_by("pk").values_list("model_id", "dimensions"))
    return documents, passages, models


@pytest.mark.parametrize("size", ["2147483648", "99999999999999999999", "100001"])
def test_agent_reindex_refuses_a_batch_size_too_large_before_changing_anything(publish, size):
    """A batch size past PostgreSQL's cursor FETCH count crashed with a raw ProgrammingError, and a --rebuild had
    already cleared the documents' indexed hashes (or dropped every passage after a change of embedding model)."""
    for n in range(3):
        publish(Article, title=f"Kettle {n}", slug=f"kettle-{n}", body=f"Descale kettle {n} with citric acid.")
    before = index_state()
    documents, passages, models = before
    assert len(documents) == 3
    assert all(documents.values())  # indexed, so a reset would show
    assert passages
    assert models
    for arguments in ([], ["--rebuild"], ["--rebuild", "--model", "testapp.article"], ["--model", "testapp.article"]):
        with pytest.raises(CommandError, match=r"^--batch-size must be between 1 and 100000\.$"):
            call_command("agent_reindex", "--batch-size", size, *arguments, stdout=StringIO())
        assert index_state() == before, arguments
    # After a change of embedding model a --rebuild drops every passage first: not for a batch size it refuses.
    EmbeddingIndex.objects.update(model_id="some/other-model")
    before = index_state()
    with pytest.raises(CommandError, match="--batch-size"):
        call_command("agent_reindex", "--batch-size", size, "--rebuild", stdout=StringIO())
    assert index_state() == before
    # Given as an option rather than on the command line, the same bound holds.
    with pytest.raises(CommandError, match="--batch-size"):
        call_command("agent_reindex", batch_size=int(size), rebuild=True, stdout=StringIO())
    assert index_state() == before


def test_agent_reindex_takes_the_largest_batch_size(publish):
    publish(Article, title="Kettle", slug="kettle", body="Descale a kettle with citric acid.")
    out = StringIO()
    call_command("agent_reindex", "--batch-size", "100000", "--rebuild", stdout=out)
    assert "testapp.article: 0 created, 0 updated, 1 unchanged, 0 deleted; 1 embedded" in out.getvalue()


# --- agent_site_key --rotate ------------------------------------------------------------------------------------


def published_identity(client) -> tuple[str, str, list]:
    identity = client.get("/.well-known/agent.json").json()["integrations"]["agent_identity"]
    return identity["did"], identity["public_key"], identity["rotated"]


def chattr(flag: str, path: Path) -> bool:
    """Set or clear the immutable attribute; False where that cannot be done (no chattr, no CAP_LINUX_IMMUTABLE, a
    file system without it)."""
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@contextmanager
def read_only_folder(folder: Path):
    """The folder made unwritable for this process: mode 0500, or, for root (whom modes do not stop), immutable."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    with immutable_file(
        folder, "running as root, where mode 0500 does not stop writes, and chattr +i is not available here"
    ):
        yield


NO_IMMUTABLE = "chattr +i is not available here (it needs root or CAP_LINUX_IMMUTABLE and a file system with it)"


@contextmanager
def immutable_file(path: Path, unavailable: str = NO_IMMUTABLE):
    """The file (or folder) made immutable, or the test skipped, saying ``unavailable``."""
    if not chattr("+i", path):
        pytest.skip(unavailable)
    try:
        yield
    finally:
        chattr("-i", path)


def assert_rotation_refused(client, settings, path: Path, blocked, reason: str) -> None:
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(path)}):
        call_command("agent_site_key", stdout=StringIO())
        key = path.read_bytes()
        files = sorted(os.listdir(path.parent))
        identity = published_identity(client)
        records = list(SiteKeyRecord.objects.order_by("did").values_list("did", "public_key", "rotated_at"))
        with blocked():
            with pytest.raises(CommandError) as refused:
                call_command("agent_site_key", "--rotate", stdout=StringIO())
            assert str(path) in str(refused.value)
            assert re.search(reason, str(refused.value)), str(refused.value)
            assert "\n" not in str(refused.value)
        # The old key stays where it was, nothing beside it, the same DID published, no key recorded as rotated.
        assert path.read_bytes() == key
        assert sorted(os.listdir(path.parent)) == files
        assert published_identity(client) == identity
        assert list(SiteKeyRecord.objects.order_by("did").values_list("did", "public_key", "rotated_at")) == records
        with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(path)}):
            # A process started now (the cached key forgotten) reads the same key from the file.
            assert published_identity(client) == identity
            out = StringIO()
            call_command("agent_site_key", stdout=out)
            assert f"DID: {identity[0]}" in out.getvalue()
            assert "created now" not in out.getvalue()
        # Once the file can be replaced, the rotation goes through.
        out = StringIO()
        call_command("agent_site_key", "--rotate", stdout=out)
        assert out.getvalue().startswith(f"Rotated: {identity[0]} -> ")
        assert path.read_bytes() != key
        (kept,) = [path.parent / name for name in os.listdir(path.parent) if name not in files]
        assert kept.read_bytes() == key
        assert kept.stat().st_mode & 0o777 == 0o600
        assert published_identity(client)[2][0]["did"] == identity[0]


def test_a_rotation_in_a_read_only_folder_is_refused_and_keeps_the_key(client, settings, tmp_path):
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    assert_rotation_refused(
        client,
        settings,
        folder / "site.pem",
        lambda: read_only_folder(folder),
        r"Permission denied|Operation not permitted",
    )


def test_a_rotation_of_an_immutable_key_file_is_refused_and_keeps_the_key(client, settings, tmp_path):
    """The folder is writable, so the old key's copy can be made; replacing the file fails after that, and the copy
    goes again: the old key is where it was, the only key on disk."""
    path = tmp_path / "site.pem"
    assert_rotation_refused(client, settings, path, lambda: immutable_file(path), r"Operation not permitted")


def test_a_rotation_whose_kept_name_is_too_long_is_refused_and_keeps_the_key(client, settings, tmp_path):
    """``<name>.rotated-<time>`` past the file system's longest name (255 bytes): refused by every user, root too."""
    path = tmp_path / ("k" * 236 + ".pem")
    with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(path)}):
        call_command("agent_site_key", stdout=StringIO())
        key = path.read_bytes()
        identity = published_identity(client)
        with pytest.raises(CommandError, match=re.escape(str(path)) + r".*File name too long"):
            call_command("agent_site_key", "--rotate", stdout=StringIO())
        assert path.read_bytes() == key
        assert os.listdir(tmp_path) == [path.name]
        assert published_identity(client) == identity
        with override_settings(AGENT_HANDSHAKE={**settings.AGENT_HANDSHAKE, "SITE_KEY_FILE": str(path)}):
            assert published_identity(client) == identity


# --- agent_insights_summary --email -----------------------------------------------------------------------------


def test_the_summary_mail_to_an_unreachable_server_is_a_command_error(settings, closed_port):
    settings.MANAGERS = [("Owner", "owner@example.com")]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = closed_port
    settings.EMAIL_TIMEOUT = 5
    out = StringIO()
    with pytest.raises(CommandError, match=r"^The summary could not be mailed .*Connection refused"):
        call_command("agent_insights_summary", "--email", "--days", "2", stdout=out)
    assert "Sent" not in out.getvalue()
    # Nothing is lost: the summary that could not be mailed is on stdout (cron mails a command's output), as without
    # --email.
    plain = StringIO()
    call_command("agent_insights_summary", "--days", "2", stdout=plain)
    assert plain.getvalue().strip()
    assert out.getvalue() == plain.getvalue()
