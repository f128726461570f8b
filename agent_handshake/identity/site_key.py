"""The site's own Ed25519 key pair: it signs the site's IntentWeb attribution entries, and its public key and DID
are published in the manifests.

The private key comes from the ``SITE_PRIVATE_KEY`` setting (PEM, or the base64url of the 32-byte seed: fit for a
secret store or an environment variable) or else from the PEM file at ``SITE_KEY_FILE``, which is created on first
use. It never goes to the database: a database dump or a fixture must not carry the key that speaks for the site.

The file is created so that processes starting together (several workers of one deployment) end with one key:
it is written to a temporary file in the same directory and hard-linked into place, which fails for every
process but the first; the others read the winner's key. ``os.replace`` would not do: the last writer would win
while the earlier ones keep signing with a key the file no longer holds.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone

from ..conf import SETTING_NAME, app_settings

DID_PREFIX = "did:agent-semantic-protocol:"
DEFAULT_KEY_PATH = Path(".agent_handshake") / "site-ed25519.pem"
SETTING_LOCATION = "the SITE_PRIVATE_KEY setting"

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 4648 §5), the encoding of every key and signature we publish."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """Decode base64url, padding optional; anything else (the ``+/`` alphabet, whitespace, wrong padding, stray
    bits in the last character) is a ValueError, so one value has one spelling.
    """
    if not isinstance(text, str):
        raise ValueError("base64url text must be a string")
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if not _B64URL.fullmatch(body) or len(body) % 4 == 1:
        raise ValueError("not base64url")
    if padding and (padding != -len(body) % 4):
        raise ValueError("wrong base64url padding")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except binascii.Error as error:
        raise ValueError("not base64url") from error
    if b64url(raw) != body:
        raise ValueError("non-canonical base64url (unused bits set in the last character)")
    return raw


def public_key_from_b64url(text: str) -> Ed25519PublicKey:
    """An Ed25519 public key from the base64url of its 32 raw bytes; ValueError for anything else."""
    raw = from_b64url(text)
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, not {len(raw)}")
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, UnsupportedAlgorithm) as error:
        raise ValueError("not an Ed25519 public key") from error


def did_of(raw_public_key: bytes) -> str:
    """The Agent Semantic Protocol DID of a raw 32-byte Ed25519 public key: hex SHA-256 of the key."""
    if len(raw_public_key) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, not {len(raw_public_key)}")
    return DID_PREFIX + hashlib.sha256(raw_public_key).hexdigest()


@dataclass(frozen=True)
class SiteKey:
    """A loaded site key, where it came from, and whether this load wrote the key file."""

    private_key: Ed25519PrivateKey
    location: str
    created: bool = False


_loaded: SiteKey | None = None


def key_file_path() -> Path:
    """``SITE_KEY_FILE``, or ``<BASE_DIR or the working directory>/.agent_handshake/site-ed25519.pem``."""
    configured = app_settings.SITE_KEY_FILE
    if configured:
        return Path(configured).expanduser()
    base = getattr(django_settings, "BASE_DIR", None) or os.getcwd()
    return Path(base) / DEFAULT_KEY_PATH


def key_location() -> str:
    """Where the private key lives, for people: the setting's name or the file's path (never the key)."""
    return SETTING_LOCATION if app_settings.SITE_PRIVATE_KEY else str(key_file_path())


def load_site_key() -> SiteKey:
    """Read the key now (creating the file when it is missing), bypassing and then refreshing the cache."""
    global _loaded
    configured = app_settings.SITE_PRIVATE_KEY
    if configured:
        loaded = SiteKey(_parse_setting(configured), SETTING_LOCATION)
    else:
        path = key_file_path()
        key, created = _read_or_create(path)
        loaded = SiteKey(key, str(path), created)
    _loaded = loaded
    return loaded


def configuration_problem() -> str | None:
    """What is wrong with the configured key, without creating anything (for the system checks): a
    ``SITE_PRIVATE_KEY`` that does not parse, or a key file that exists and cannot be read; None if nothing."""
    try:
        if app_settings.SITE_PRIVATE_KEY:
            _parse_setting(app_settings.SITE_PRIVATE_KEY)
        elif key_file_path().exists():
            _read(key_file_path())
    except ImproperlyConfigured as error:
        return str(error)
    return None


def site_private_key() -> Ed25519PrivateKey:
    """The site's private key, loaded once per process (and again after ``AGENT_HANDSHAKE`` changes)."""
    loaded = _loaded
    if loaded is None:
        loaded = load_site_key()
    return loaded.private_key


def site_public_key_bytes() -> bytes:
    return site_private_key().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def site_public_key() -> str:
    """The site's public key as published: base64url of the raw 32 bytes, no padding."""
    return b64url(site_public_key_bytes())


def site_did() -> str:
    return did_of(site_public_key_bytes())


def sign(data: bytes) -> bytes:
    """An Ed25519 signature (64 bytes) of ``data`` by the site's key."""
    return site_private_key().sign(data)


def rotate_site_key() -> tuple[str, str, Path]:
    """Replace the key file's key with a new one; the old key is kept beside it (``.rotated-<unix time>``) and the
    old DID recorded as rotated. Returns the old DID, the new DID and the kept file's path. Other processes
    keep signing with the old key until they restart.

    A file system that refuses (a read-only folder, an immutable file, a name too long) is ImproperlyConfigured,
    and the key file then still holds the old key: the new key is written beside it and moved over it in one step,
    so there is no moment without a key file, when a starting process would make a key of its own."""
    if app_settings.SITE_PRIVATE_KEY:
        raise ImproperlyConfigured(
            "The site key comes from the SITE_PRIVATE_KEY setting: rotate it by setting a new one (the manifests "
            "then announce the old DID as rotated)."
        )
    global _loaded
    load_site_key()
    old = site_did()
    rotated_site_keys()  # the old key is on record before it goes
    path = key_file_path()
    where = f"the site key file {path} ({SETTING_NAME}['SITE_KEY_FILE'])"
    try:
        old_pem = path.read_bytes()
        kept = _keep_copy(path.with_name(f"{path.name}.rotated-{int(time.time())}"), old_pem)
    except OSError as error:
        raise ImproperlyConfigured(
            f"Cannot rotate {where}: keeping a copy of the old key beside it failed: {_reason(error)}. "
            "Nothing was changed; the old key is still in use."
        ) from None
    try:
        _replace(path)
    except OSError as error:
        with contextlib.suppress(OSError):
            kept.unlink()
        raise ImproperlyConfigured(
            f"Cannot rotate {where}: replacing it with a new key failed: {_reason(error)}. "
            "Nothing was changed; the old key is still in use."
        ) from None
    _loaded = None
    load_site_key()
    rotated_site_keys()
    return old, site_did(), kept


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _keep_copy(path: Path, pem: bytes) -> Path:
    """Write ``pem`` to ``path``, or ``path-2``, ``path-3``...: the first that is not taken (two rotations within one
    second would otherwise share a name, and the second would overwrite the first one's kept key). Mode 0600."""
    candidate, number = path, 1
    while True:
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            number += 1
            candidate = path.with_name(f"{path.name}-{number}")
            continue
        _fill(fd, candidate, pem)
        return candidate


def _replace(path: Path) -> None:
    """Put a new key at ``path`` in one step (written to a temporary file beside it, then moved over it)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    temporary = _written_beside(path, pem)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(path.parent)


def rotated_site_keys() -> list[Any]:
    """The site keys rotated away from, newest first (:class:`~agent_handshake.models.SiteKeyRecord`).

    The site notices a rotation itself: the first time a process serving a new key builds a manifest, the new key
    is recorded and every other recorded key is marked rotated (a deployment that rotates keeps one key at a
    time: ``manage.py agent_site_key --rotate``, or a new ``SITE_PRIVATE_KEY``)."""
    # Deferred: the key itself loads without Django's app registry (a process that only signs), the records need it.
    from ..models import SiteKeyRecord

    current = site_did()
    if not SiteKeyRecord.objects.filter(did=current, rotated_at=None).exists():
        with transaction.atomic():
            SiteKeyRecord.objects.update_or_create(
                did=current, defaults={"public_key": site_public_key(), "rotated_at": None}
            )
            SiteKeyRecord.objects.exclude(did=current).filter(rotated_at=None).update(rotated_at=timezone.now())
    return list(SiteKeyRecord.objects.exclude(did=current).exclude(rotated_at=None).order_by("-rotated_at"))


def _parse_setting(value: Any) -> Ed25519PrivateKey:
    # The messages say what is wrong with the value and never quote it: it is a secret, and errors end up in logs.
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise ImproperlyConfigured(
                f"{SETTING_NAME}['SITE_PRIVATE_KEY'] is not ASCII text: give a PEM private key or the base64url "
                "of a 32-byte Ed25519 seed."
            ) from None
    if not isinstance(value, str):
        raise ImproperlyConfigured(
            f"{SETTING_NAME}['SITE_PRIVATE_KEY'] must be a string (a PEM private key or the base64url of a 32-byte "
            f"Ed25519 seed), not {type(value).__name__}."
        )
    text = value.strip()
    if text.startswith("-----BEGIN"):
        return _parse_pem(text.encode("ascii", "replace"), f"{SETTING_NAME}['SITE_PRIVATE_KEY']")
    try:
        seed = from_b64url(text)
    except ValueError:
        raise ImproperlyConfigured(
            f"{SETTING_NAME}['SITE_PRIVATE_KEY'] is neither a PEM private key nor base64url (of a 32-byte Ed25519 "
            "seed)."
        ) from None
    if len(seed) != 32:
        raise ImproperlyConfigured(
            f"{SETTING_NAME}['SITE_PRIVATE_KEY'] decodes to {len(seed)} bytes; an Ed25519 seed is 32 bytes "
            "(base64url, 43 characters without padding)."
        )
    return Ed25519PrivateKey.from_private_bytes(seed)


def _parse_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        # cryptography's way of saying the PEM is encrypted: the key must load without a passphrase.
        raise ImproperlyConfigured(f"{where} holds an encrypted PEM private key; store it unencrypted.") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ImproperlyConfigured(f"{where} is not a readable PEM (PKCS#8) private key.") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured(f"{where} holds a {type(key).__name__.lstrip('_')}, not an Ed25519 private key.")
    return key


def _read(path: Path) -> Ed25519PrivateKey:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ImproperlyConfigured(
            f"Cannot read the site key file {path} ({SETTING_NAME}['SITE_KEY_FILE']): {error.strerror}."
        ) from None
    return _parse_pem(data, f"The site key file {path} ({SETTING_NAME}['SITE_KEY_FILE'])")


def _read_or_create(path: Path) -> tuple[Ed25519PrivateKey, bool]:
    if path.exists():
        return _read(path), False
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        won = _publish(path, pem)
    except OSError as error:
        raise ImproperlyConfigured(
            f"Cannot create the site key file {path} ({SETTING_NAME}['SITE_KEY_FILE']): {error.strerror}. Create "
            "it with `python manage.py agent_site_key` where that is allowed, or set SITE_PRIVATE_KEY."
        ) from None
    if not won:
        return _read(path), False
    return key, True


def _written_beside(path: Path, pem: bytes) -> str:
    """A temporary file in ``path``'s directory holding ``pem``, on disk, to be moved or linked to ``path``.

    mkstemp creates it with mode 0600, so the key is never readable by others, not even briefly; a failed write
    leaves no file behind."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".site-ed25519-", suffix=".tmp")
    _fill(fd, Path(temporary), pem)
    return temporary


def _publish(path: Path, pem: bytes) -> bool:
    """Put ``pem`` at ``path`` unless a file is already there; True when ours is the one that stays."""
    temporary = _written_beside(path, pem)
    try:
        try:
            os.link(temporary, path)
            won = True
        except FileExistsError:
            won = False
        except OSError:
            # No hard links on this file system: an exclusive create gives the same one-winner guarantee.
            won = _create_exclusive(path, pem)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    if won:
        _sync_directory(path.parent)
    return won


def _create_exclusive(path: Path, pem: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    _fill(fd, path, pem)
    return True


def _fill(fd: int, path: Path, pem: bytes) -> None:
    """Write ``pem`` to the new file ``path`` open as ``fd``, on disk when this returns; a failed write removes the
    file, so no half-written key is left to be read as one."""
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise


def _sync_directory(directory: Path) -> None:
    # The key is published (its public half is in the manifests) as soon as it is used: make its name survive a
    # crash too, or a restart would make a new key. Not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


@receiver(setting_changed)
def _forget_site_key(*, setting: str, **kwargs: Any) -> None:
    global _loaded
    if setting == SETTING_NAME:
        _loaded = None
