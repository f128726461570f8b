"""Authentication of visiting agents (AHP §8.2): ``bearer``, ``api_key`` and ``signed_request``, and the session
credentials of verified agents (``did_session``).

The first three use the same :class:`~agent_handshake.models.ApiKey`:

- ``Authorization: Bearer <secret>``;
- ``X-AHP-Key: <secret>``;
- ``signed_request``: the secret never travels. The agent sends ``X-AHP-Key-Id``, ``X-AHP-Timestamp`` (Unix
  seconds) and ``X-AHP-Signature: v1=<hex>``, the HMAC-SHA256, keyed with the secret, of the string::

      AHP-HMAC-SHA256\\n<METHOD>\\n<path and query as sent>\\n<timestamp>\\n<hex SHA-256 of the body>

  The timestamp must be within ``SIGNATURE_MAX_SKEW`` seconds of the server's clock, and a signature is
  accepted once (the replay cache is a table, so every process agrees).

A verified agent's session credential (``asp_...``, from :mod:`.handshake`) travels as ``Authorization: Bearer``
(or wherever a bearer secret may), and stands for the agent's own key, with the scopes and rate-limit tier of its
trust (:mod:`.trust`); a blocked DID, or one whose own API key an operator revoked (or let expire) or whose agent client
is inactive, gets 403 with its code (:func:`.handshake.refusal_of`).

A request that presents no credentials is anonymous (``None``); one that presents wrong, revoked or expired
credentials gets 401, whatever the capability.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import time
from dataclasses import dataclass

from django.http import HttpRequest
from django.utils import timezone

from .. import keys
from ..conf import app_settings
from ..models import ApiKey, SeenSignature, VerifiedAgent
from . import handshake, trust

SIGNATURE_ALGORITHM = "AHP-HMAC-SHA256"
LAST_USED_RESOLUTION = datetime.timedelta(seconds=60)
#: Unix seconds in ASCII digits; 15 of them reach past the year 30,000,000, so anything longer is refused before
#: it is turned into a number (``int()`` would also take other scripts' digits and "1_000").
TIMESTAMP = re.compile(r"[0-9]{1,15}")
SIGNATURE = re.compile(r"[0-9a-f]{64}")


class AuthError(Exception):
    def __init__(self, message: str, status: int = 401, code: str = "auth_required") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Credentials:
    key: ApiKey
    scheme: str  # "bearer", "api_key", "signed_request" or "did_session"
    #: A verified agent's session (``did_session``): the agent, whose own API key is ``key``.
    agent: VerifiedAgent | None = None
    #: The RATE_LIMITS tier the requests are counted under (a verified agent's comes from its trust).
    rate_tier: str = "authenticated"

    @property
    def rate_key(self) -> str:
        return self.key.key_id

    @property
    def did(self) -> str | None:
        return self.agent.did if self.agent is not None else None


def string_to_sign(method: str, full_path: str, timestamp: str, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join([SIGNATURE_ALGORITHM, method.upper(), full_path, timestamp, digest]).encode()


def sign_request(secret: str, method: str, full_path: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers of a signed request (what an agent's client does; the tests and benchmarks use it)."""
    key_id = keys.key_id_of(secret) or ""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = hmac.new(secret.encode(), string_to_sign(method, full_path, stamp, body), hashlib.sha256).hexdigest()
    return {"X-AHP-Key-Id": key_id, "X-AHP-Timestamp": stamp, "X-AHP-Signature": f"v1={signature}"}


def printable_ascii(value: str) -> bool:
    """Every credential we issue, and every Idempotency-Key we accept, is printable ASCII; anything else (NUL,
    controls, other scripts) cannot match and is refused before it reaches a query or a comparison."""
    return value.isascii() and value.isprintable()


def _find_key(key_id: str | None) -> ApiKey | None:
    if not key_id or not printable_ascii(key_id):
        return None
    return ApiKey.objects.select_related("client").filter(key_id=key_id).first()


def _usable(key: ApiKey) -> ApiKey:
    """The key, if it may be used now (recording its use at most once a minute)."""
    now = timezone.now()
    refusal = key.refusal(now)
    if refusal:
        raise AuthError(f"The API key is {refusal}.")
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def _by_session(token: str) -> Credentials:
    """A verified agent's session credential (:mod:`.handshake`): its agent's own key, with the scopes and rate
    limits of the agent's trust tier."""
    agent = handshake.session_agent(token) if printable_ascii(token) else None
    if agent is None:
        raise AuthError("The session credential is not valid or has expired: complete a new handshake.")
    refusal = handshake.refusal_of(agent)  # blocked, or its own key or client withdrawn: 403 with its code
    if refusal is not None:
        raise AuthError(refusal.message, status=refusal.status, code=refusal.code)
    key = agent.key
    key.scopes = trust.scopes_of(agent)  # for this request only: the tier follows the trust
    return Credentials(_usable(key), "did_session", agent, trust.tier_of(agent.trust).rate_limits)


def _by_secret(secret: str, scheme: str) -> Credentials:
    secret = secret.strip()
    if secret.startswith(handshake.TOKEN_PREFIX):
        return _by_session(secret)
    key = _find_key(keys.key_id_of(secret)) if printable_ascii(secret) else None
    if key is None or not keys.matches(secret, key.secret_hash):
        raise AuthError("The credentials are not valid.")
    return Credentials(_usable(key), scheme)


def _by_signature(request: HttpRequest, body: bytes) -> Credentials:
    headers = request.headers
    key_id, stamp, signature = (
        headers.get("X-AHP-Key-Id"),
        headers.get("X-AHP-Timestamp"),
        headers.get("X-AHP-Signature", ""),
    )
    if not key_id or not stamp:
        raise AuthError("A signed request needs X-AHP-Key-Id, X-AHP-Timestamp and X-AHP-Signature.")
    given = signature[3:].strip().lower()
    if not signature.startswith("v1=") or not SIGNATURE.fullmatch(given):
        raise AuthError("X-AHP-Signature must be 'v1=<hex HMAC-SHA256>'.")
    if not TIMESTAMP.fullmatch(stamp):
        raise AuthError("X-AHP-Timestamp must be Unix seconds.")
    skew = app_settings.SIGNATURE_MAX_SKEW
    if abs(time.time() - int(stamp)) > skew:
        raise AuthError(f"X-AHP-Timestamp is more than {skew} seconds from the server's clock.")
    key = _find_key(key_id)
    secret = key.secret() if key else None
    if secret is None:
        raise AuthError("The credentials are not valid.")
    expected = hmac.new(
        secret.encode(), string_to_sign(request.method or "", request.get_full_path(), stamp, body), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, given):
        raise AuthError("The request signature does not match.")
    if not SeenSignature.spend(given):
        raise AuthError("This signed request was already used (replay).")
    return Credentials(_usable(key), "signed_request")


def authenticate(request: HttpRequest, body: bytes, body_auth: object = None) -> Credentials | None:
    """The request's credentials, None if it presents none, or :class:`AuthError`.

    ``body_auth`` is the optional body ``auth`` field (``"Bearer <secret>"``), which an appendix of the
    spec shows; headers take precedence.
    """
    headers = request.headers
    authorization = headers.get("Authorization", "")
    if authorization[:7].lower() == "bearer ":
        return _by_secret(authorization[7:], "bearer")
    if headers.get("X-AHP-Key"):
        return _by_secret(headers["X-AHP-Key"], "api_key")
    if headers.get("X-AHP-Signature"):
        return _by_signature(request, body)
    if isinstance(body_auth, str) and body_auth[:7].lower() == "bearer ":
        return _by_secret(body_auth[7:], "bearer")
    return None
