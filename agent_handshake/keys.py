"""API key secrets: how they are made, stored and checked.

A secret looks like ``ahp_<key id>_<token>``. The token is HMAC-SHA256(``SECRET_KEY``, key id + salt), so:

- the database keeps only the key id, the salt and a SHA-256 hash of the secret: a copy of it reveals no
  usable secret, and ``bearer``/``api_key`` checks compare hashes without needing ``SECRET_KEY``;
- the server can recompute the secret when it needs the secret itself, as an HMAC key: to check a
  ``signed_request`` and to sign callbacks. ``SECRET_KEY_FALLBACKS`` are tried too, so rotating ``SECRET_KEY``
  the Django way keeps existing keys working for signatures until they are re-issued.

Secrets carry 256 bits from an HMAC, so a fast hash (not a password hasher) is the right way to store them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from django.conf import settings

PREFIX = "ahp"


def new_key_id() -> str:
    return secrets.token_hex(6)


def new_salt() -> str:
    return secrets.token_hex(16)


def _token(secret_key: str, key_id: str, salt: str) -> str:
    digest = hmac.new(secret_key.encode(), f"agent_handshake.api-key:{key_id}:{salt}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def derive_secret(key_id: str, salt: str, secret_key: str | None = None) -> str:
    return f"{PREFIX}_{key_id}_{_token(secret_key or settings.SECRET_KEY, key_id, salt)}"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def key_id_of(secret: str) -> str | None:
    """The key id a presented secret claims, or None if it is not shaped like one of ours."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1]


def matches(secret: str, secret_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), secret_hash)


def recover_secret(key_id: str, salt: str, secret_hash: str) -> str | None:
    """The key's secret, recomputed with ``SECRET_KEY`` or a fallback; None if none of them made it."""
    for secret_key in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]:
        secret = derive_secret(key_id, salt, secret_key)
        if matches(secret, secret_hash):
            return secret
    return None
