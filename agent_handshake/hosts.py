"""The site's own scheme and host, for the absolute URLs every front door and document emits (links, endpoints,
the ``actor_id`` the site signs as): one rule, here, so that no door echoes what a client wrote in ``Host``.

Every layer may import this module: it imports nothing of the app but its settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest
from django.http.request import split_domain_port

from .conf import app_settings

DEFAULT_PORTS = {"http": "80", "https": "443"}


def port_number(text: str) -> str | None:
    """A port as digits without leading zeros ("08000" is "8000"); None if ``text`` is not one."""
    return (text.lstrip("0") or "0") if text.isdigit() and text.isascii() else None


@dataclass(frozen=True)
class Origin:
    """Where a request reached the site: its scheme, its host as ``ALLOWED_HOSTS`` checked it, and its port (None
    for the scheme's default, left out of URLs)."""

    scheme: str
    domain: str
    port: str | None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.domain}" + (f":{self.port}" if self.port else "")


def request_origin(request: HttpRequest) -> Origin:
    """The request's origin as the site serves it: its host as ``ALLOWED_HOSTS`` checked it (lowercased, no trailing
    dot), with a port only where the server listens. ``ALLOWED_HOSTS`` checks no port, so the one in ``Host`` is
    whatever the client wrote: it is kept when it is the scheme's default (and left out) or the server's own
    (``SERVER_PORT``, or ``X-Forwarded-Port`` with ``USE_X_FORWARDED_PORT``), and any other gives way to the
    server's own. Every client thus gets URLs of where the site is served.

    ``request`` may be Django's request or DRF's, which passes these attributes through."""
    scheme = request.scheme
    domain, written = split_domain_port(request.get_host())
    default, served = DEFAULT_PORTS.get(scheme), port_number(request.get_port())
    port = port_number(written) if written else default
    if port not in (default, served):
        port = served
    return Origin(scheme, domain, None if port in (None, default) else port)


def base_url(request: HttpRequest) -> str:
    """Scheme and host for absolute URLs, without a trailing slash: the ``BASE_URL`` setting when it is set, else
    the request's origin (:func:`request_origin`)."""
    return app_settings.BASE_URL.rstrip("/") or request_origin(request).url
