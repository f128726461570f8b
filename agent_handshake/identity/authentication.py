"""Who is calling, for every front door: DRF authentication classes over :mod:`.auth`.

:class:`AgentKeyAuthentication` reads the credentials AHP defines (``Authorization: Bearer``, ``X-AHP-Key``, or
an HMAC-signed request: ``X-AHP-Key-Id``, ``X-AHP-Timestamp``, ``X-AHP-Signature`` over the raw body) and gives
``request.user`` an :class:`AgentUser` and ``request.auth`` the :class:`~.auth.Credentials`; a request without
credentials stays anonymous (each capability decides whether it needs them). Refused credentials raise
:class:`CredentialsRefused`, a 401 with ``WWW-Authenticate: Bearer realm="agent_handshake"``, which each front
door's exception handler renders in its own shape.
"""

from __future__ import annotations

import abc
from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from . import auth

REALM = 'Bearer realm="agent_handshake"'


class CredentialsRefused(exceptions.AuthenticationFailed):
    """Credentials were presented and refused (unknown, revoked, expired, a bad or replayed signature)."""

    def __init__(self, error: auth.AuthError) -> None:
        super().__init__(error.message, code=error.code)
        self.error = error


class AgentUser:
    """The agent client behind an API key, as ``request.user``."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, credentials: auth.Credentials) -> None:
        self.credentials = credentials
        self.key = credentials.key

    @property
    def pk(self) -> Any:
        return self.key.pk

    def __str__(self) -> str:
        return f"agent key {self.key.key_id}"


class AgentKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AgentUser, auth.Credentials] | None:
        django_request = request._request
        # The raw body is read (and cached) here, before any parser reads the stream: a signature covers it.
        body = django_request.body if django_request.headers.get("X-AHP-Signature") else b""
        try:
            credentials = auth.authenticate(django_request, body)
        except auth.AuthError as exc:
            raise CredentialsRefused(exc) from exc
        if credentials is None:
            return None
        return AgentUser(credentials), credentials

    def authenticate_header(self, request: Request) -> str:
        return REALM


class BodyCredentialsAuthentication(BaseAuthentication, abc.ABC):
    """Credentials a protocol carries in its JSON body (``"Bearer <secret>"``, or the bare secret), after the
    headers (:class:`AgentKeyAuthentication` comes first). Subclasses say where in the body they are."""

    @abc.abstractmethod
    def credentials_in(self, data: Any) -> object:
        """The credentials field of the parsed body, or None."""

    def authenticate(self, request: Request) -> tuple[AgentUser, auth.Credentials] | None:
        value = self.credentials_in(request.data)
        if not isinstance(value, str) or not value.strip():
            return None
        token = value if value[:7].lower() == "bearer " else f"Bearer {value.strip()}"
        try:
            credentials = auth.authenticate(request._request, b"", token)
        except auth.AuthError as exc:
            raise CredentialsRefused(exc) from exc
        return (AgentUser(credentials), credentials) if credentials else None

    def authenticate_header(self, request: Request) -> str:
        return REALM
