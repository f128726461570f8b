"""The discovery documents' base URL when ``BASE_URL`` is unset: built from the request, yet no header decides how
many copies the shared cache keeps, and every copy links to where the site is really served. And
``/intentmanifest.yaml`` with a site key that does not load."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import yaml
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache

from agent_handshake import views
from agent_handshake.conf import app_settings
from tests.conftest import SERVED_HOST
from tests.discovery.test_front_door_hosts import assert_site_key_unavailable

pytestmark = pytest.mark.django_db

HOST = SERVED_HOST
DOCUMENTS = ("/.well-known/agent.json", "/llms.txt", "/intentmanifest.yaml")
# The keys AgentDocumentView stores a rendered body under: agent_handshake:<kind>-<state token>-<base hash>, where
# the manifests' kind carries the first 16 characters of the site's public key (base64url).
DOCUMENT_KEY = re.compile(
    r"agent_handshake:(?:(?:intent)?manifest-[A-Za-z0-9_-]{16}|manifest|llms)-[0-9a-f]{20}-[0-9a-f]{12}$"
)
URL = re.compile(r"https?://[^\s\"'<>()\[\]`]+")


def document_entries() -> set[str]:
    """The rendered documents in the configured cache: every key of the test's LocMemCache, read as it is."""
    cache = caches[app_settings.CACHE_ALIAS]
    assert isinstance(cache, LocMemCache)  # tests/settings.py; a different backend would need another count
    return {key for key in cache._cache if DOCUMENT_KEY.search(key)}


def ports_linked(body: bytes, host: str = HOST) -> set[str | None]:
    """The ports of every absolute link to ``host`` in a body, as written (None: no port, the scheme's default)."""
    ports = set()
    for url in URL.findall(body.decode()):
        name, colon, port = urlsplit(url.rstrip(".,;:")).netloc.partition(":")
        if name == host:
            ports.add(port if colon else None)
    return ports


def fetch(client, path: str, host: str, **extra):
    response = client.get(path, HTTP_HOST=host, **extra)
    assert response.status_code == 200, (path, host, response.content[:300])
    return response


def test_a_client_chosen_port_adds_no_cache_entry_and_no_link_to_it(client, host_site):
    for path in DOCUMENTS:
        assert ports_linked(fetch(client, path, HOST).content) == {None}
    stored = document_entries()
    assert len(stored) == len(DOCUMENTS)

    # The test client's SERVER_PORT is 80: the site is served on http's default port, whatever Host says.
    ports = [str(port) for port in range(1, 41)] + ["0" * 40 + "1", "65535", "99999", "8000", "443", "00080"]
    for port in ports:
        for path in DOCUMENTS:
            body = fetch(client, path, f"{HOST}:{port}").content
            assert ports_linked(body) == {None}, (path, port)
            assert f":{port}/" not in body.decode()
    # The same spelled otherwise (letter case, the trailing dot split_domain_port drops) is the same document.
    for spelling in ("AGENTS.example", "Agents.Example.", "agents.example.:80"):
        for path in DOCUMENTS:
            assert ports_linked(fetch(client, path, spelling).content) == {None}, (path, spelling)
    assert document_entries() == stored


def test_a_site_on_runserver_port_links_to_that_port(client, host_site):
    for path in DOCUMENTS:
        body = fetch(client, path, f"{HOST}:8000", SERVER_PORT="8000").content
        assert ports_linked(body) == {"8000"}, path
    manifest = fetch(client, DOCUMENTS[0], f"{HOST}:8000", SERVER_PORT="8000").json()
    assert manifest["links"]["nlweb_ask"] == f"http://{HOST}:8000/ask"
    # Another port in Host is not where this server listens: its links go to the server's own port.
    for port in ("9000", "8001", "1", "0" * 30 + "8000"):
        for path in DOCUMENTS:
            body = fetch(client, path, f"{HOST}:{port}", SERVER_PORT="8000").content
            assert ports_linked(body) == {"8000"}, (path, port)
    # A non-default port is kept in the process, not in the shared cache (see the unix-socket test below).
    assert document_entries() == set()

    # No port, or http's own, is the plain host (a proxy on port 80 in front of runserver), shared as usual.
    for host in (HOST, f"{HOST}:80", f"{HOST}:0080"):
        for path in DOCUMENTS:
            assert ports_linked(fetch(client, path, host, SERVER_PORT="8000").content) == {None}, (path, host)
    assert len(document_entries()) == len(DOCUMENTS)


def test_a_server_port_copied_from_host_adds_no_cache_entry(client, host_site):
    """gunicorn on a unix socket (behind nginx's ``proxy_set_header Host $http_host``) sets SERVER_PORT to the port
    written in Host, so "the server's own port" is the client's choice there: the shared cache must not follow it."""
    for path in DOCUMENTS:
        fetch(client, path, HOST)
    stored = document_entries()
    assert len(stored) == len(DOCUMENTS)
    for port in range(1000, 1040):
        for path in DOCUMENTS:
            body = fetch(client, path, f"{HOST}:{port}", SERVER_PORT=str(port)).content
            assert ports_linked(body) == {str(port)}, (path, port)  # what this server says it serves
    assert document_entries() == stored
    assert len(views._local_bodies) <= views.LOCAL_BODIES_LIMIT


def test_https_default_port_is_the_plain_host(client, host_site):
    for path in DOCUMENTS:
        body = fetch(client, path, f"{HOST}:443", SERVER_PORT="443", secure=True).content
        assert ports_linked(body) == {None}, path
        assert f"https://{HOST}/" in body.decode()
        assert f"http://{HOST}" not in body.decode()
    assert len(document_entries()) == len(DOCUMENTS)


def test_a_trusted_forwarded_port_is_the_site_port(client, host_site):
    """Behind a proxy on a non-default port that sends X-Forwarded-Port, with USE_X_FORWARDED_PORT on."""
    host_site.USE_X_FORWARDED_PORT = True
    for path in DOCUMENTS:
        body = fetch(client, path, f"{HOST}:8443", SERVER_PORT="8000", HTTP_X_FORWARDED_PORT="8443").content
        assert ports_linked(body) == {"8443"}, path
        # A Host port the proxy did not forward is not used either.
        body = fetch(client, path, f"{HOST}:1234", SERVER_PORT="8000", HTTP_X_FORWARDED_PORT="8443").content
        assert ports_linked(body) == {"8443"}, path
    assert document_entries() == set()


def test_base_url_setting_is_used_as_is(client, host_site):
    host_site.AGENT_HANDSHAKE = {**host_site.AGENT_HANDSHAKE, "BASE_URL": "https://www.agents.example:8443/"}
    for port in ("1", "2", "3"):
        for path in DOCUMENTS:
            body = fetch(client, path, f"{HOST}:{port}").content
            assert ports_linked(body, "www.agents.example") == {"8443"}, path
            assert ports_linked(body) == set(), path
    assert len(document_entries()) == len(DOCUMENTS)


@pytest.mark.parametrize("allowed", [["*"], [".agents.example"]])
def test_hosts_a_wildcard_lets_in_are_answered_but_not_stored(client, host_site, allowed):
    """A wildcard in ALLOWED_HOSTS lets a client name as many hosts as it likes: each gets its own links, and no
    entry of the shared cache (a bounded few in the process). The site's own name, when ALLOWED_HOSTS spells it
    out, is stored as before."""
    host_site.ALLOWED_HOSTS = [*allowed, "testserver"]
    for n in range(20):
        name = f"a{n}.agents.example"
        for path in DOCUMENTS:
            body = fetch(client, path, f"{name}:{n + 1}").content
            assert ports_linked(body, name) == {None}, (path, name)
    assert document_entries() == set()
    assert len(views._local_bodies) <= views.LOCAL_BODIES_LIMIT

    host_site.ALLOWED_HOSTS = [*allowed, HOST]
    for path in DOCUMENTS:
        fetch(client, path, HOST)
        fetch(client, path, "a0.agents.example")
    assert len(document_entries()) == len(DOCUMENTS)


def test_conditional_get_still_answers_304(client, host_site):
    first = fetch(client, "/llms.txt", f"{HOST}:7")
    again = client.get("/llms.txt", HTTP_HOST=f"{HOST}:8", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert fetch(client, "/llms.txt", HOST)["ETag"] == first["ETag"]


def test_intent_manifest_with_a_broken_site_key_is_a_json_503(client, host_site):
    working = dict(host_site.AGENT_HANDSHAKE)
    host_site.AGENT_HANDSHAKE = {**working, "SITE_PRIVATE_KEY": "garbage"}
    assert_site_key_unavailable(client.get("/intentmanifest.yaml", HTTP_HOST=HOST))
    assert client.head("/intentmanifest.yaml", HTTP_HOST=HOST).status_code == 503
    # The AHP manifest is answered without the key, as before.
    manifest = client.get("/.well-known/agent.json", HTTP_HOST=HOST)
    assert manifest.status_code == 200
    assert "public_key" not in manifest.json()["integrations"]["intentweb"]

    # The key fixed: the IntentWeb manifest is back, with it.
    host_site.AGENT_HANDSHAKE = working
    restored = fetch(client, "/intentmanifest.yaml", HOST)
    assert yaml.safe_load(restored.content)["attribution"]["public_key"]
