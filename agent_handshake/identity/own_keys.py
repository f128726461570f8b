"""API keys the site issues to itself, for the pages through which people act as agents do (IntentWeb's intent page).

People have no API key: such a page acts with a key of the site's own, of an agent client of its own, created on
first use and kept in step with the scopes a setting gives it, so that the page is authorised, limited and recorded
as every caller is.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..models import AgentClient, ApiKey


def own_key(client_name: str, key_name: str, scopes: Iterable[str]) -> ApiKey:
    """The live key ``key_name`` of the site's agent client ``client_name`` (each created if there is none), with
    exactly ``scopes``."""
    wanted = sorted(set(scopes))
    client, _ = AgentClient.objects.get_or_create(name=client_name)
    key = ApiKey.objects.filter(client=client, name=key_name, revoked_at__isnull=True).first()
    if key is None:
        key, _ = ApiKey.objects.issue(client, name=key_name, scopes=wanted)
    elif sorted(key.scopes) != wanted:
        key.scopes = wanted
        key.save(update_fields=["scopes"])
    return key
