"""A CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is the browser's question, not the agent's
request: it does no work, carries no credentials, and a page pays one before its requests. It is never counted
nor refused by the rate limits; its ``X-RateLimit-*`` headers show the client network's count as it stands."""

from __future__ import annotations

import pytest

from agent_handshake.models import TrustEvent, VerifiedAgent
from tests.concierge.test_limits import configure, issue
from tests.identity.test_verified_agents import Agent
from tests.mcp.test_resources_and_browser_origins import CONSOLE, browser_fetch

pytestmark = pytest.mark.django_db
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
VERSION = {"MCP-Protocol-Version": "2025-11-25"}


def test_a_keyed_browser_page_is_not_refused_by_its_networks_anonymous_limit(client, settings):
    """The preflight carries no Authorization, so it was counted on the page's network's anonymous count (and
    answered 429 once that was spent: the browser then refuses the page every request, whatever its key allows)."""
    configure(settings, MCP_ALLOWED_ORIGINS=[CONSOLE], RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    keyed = {**VERSION, "Authorization": f"Bearer {issue()}"}
    answers = [browser_fetch(client, CONSOLE, PING, keyed)[0] for _ in range(5)]
    assert [(r.status_code, r["X-RateLimit-Limit"]) for r in answers] == [(200, "120")] * 5
    assert [r["X-RateLimit-Remaining"] for r in answers] == ["119", "118", "117", "116", "115"]


def test_an_anonymous_browser_page_gets_the_published_number_of_requests(client, settings):
    """Counted with its preflight, each of an anonymous page's requests cost two of the published two a minute."""
    configure(settings, MCP_ALLOWED_ORIGINS=[CONSOLE], RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    answers = [browser_fetch(client, CONSOLE, PING, VERSION)[0] for _ in range(2)]
    assert [(r.status_code, r["X-RateLimit-Remaining"]) for r in answers] == [(200, "1"), (200, "0")]
    # The third request is refused; its preflight is not, and says what is left (nothing), uncounted.
    preflight = client.options(
        "/mcp",
        HTTP_ORIGIN=CONSOLE,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type,mcp-protocol-version",
    )
    assert preflight.status_code == 200
    assert (preflight["X-RateLimit-Limit"], preflight["X-RateLimit-Remaining"]) == ("2", "0")
    assert "Retry-After" not in preflight
    refused, readable = browser_fetch(client, CONSOLE, PING, VERSION)
    assert (refused.status_code, readable["X-RateLimit-Remaining"]) == (429, "0")
    assert int(readable["Retry-After"]) >= 1


@pytest.mark.parametrize("path", ["/agent/converse", "/ask", "/mcp", "/intent"])
def test_options_is_never_counted_on_any_door(client, settings, path):
    """Doors that count after reading the body (AHP) counted an OPTIONS when adding its headers; the others when
    authenticating it."""
    configure(settings, RATE_LIMITS={"unauthenticated": {"requests": "2/minute"}})
    answers = [client.options(path, REMOTE_ADDR="192.0.2.7") for _ in range(4)]
    assert [(r.status_code, r["X-RateLimit-Remaining"]) for r in answers] == [(200, "2")] * 4
    first = client.post(path, "{}", content_type="application/json", REMOTE_ADDR="192.0.2.7")
    assert (first.status_code != 429, first["X-RateLimit-Remaining"]) == (True, "1")


@pytest.mark.parametrize("path", ["/mcp", "/ask", "/intent"])
def test_options_moves_no_verified_agents_trust(client, settings, path):
    """An OPTIONS with a DID's session credential was a request the site accepted (+0.05 each): ten empty answers,
    uncounted by any limit, took a new agent from 0.5 to the top tier's trust."""
    agent = Agent(client)
    agent.handshake()
    answers = [client.options(path, **agent.headers) for _ in range(10)]
    assert {r.status_code for r in answers} == {200}
    verified = VerifiedAgent.objects.get(did=agent.did)
    assert verified.trust == pytest.approx(0.5)
    assert not TrustEvent.objects.filter(agent=verified).exists()
