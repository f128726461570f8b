"""A long agent name (up to 200 characters, one word when an agent declares it so) on the agent traffic pages, in
headless Chromium (as ``tests/browser/test_pages.py`` reads them): every table stays in its box and no page scrolls
sideways; the name is shown whole, wrapped, since two agents' names may differ only at their ends."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.browser.test_pages import CHROMIUM
from tests.nlweb.test_live_servers import serve

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

LONG_NAME = "agent-" + "x" * 150 + " @ 203.0.113.0/24"
LONG_QUESTION = "Is this your page? https://tea.example/" + "a" * 80

#: Whether anything on the page runs past its box: the page's own width, and each table past its module's edge.
OVERFLOWS = """() => {
  const out = [];
  const width = document.documentElement.scrollWidth;
  if (width > window.innerWidth) out.push("page " + width);
  for (const table of document.querySelectorAll("#content-main table")) {
    const box = table.closest(".module") || table.parentElement;
    const over = table.getBoundingClientRect().right - box.getBoundingClientRect().right;
    if (over > 1) out.push((box.id || table.caption?.textContent || "table") + " +" + Math.round(over) + "px");
  }
  const name = document.getElementById("agent-name");
  if (name && name.getBoundingClientRect().right > window.innerWidth) out.push("agent-name");
  return out;
}"""


@pytest.fixture(scope="module")  # written before the test's transaction: the live server reads it
def long_named_traffic(django_db_setup, django_db_blocker):
    from django.contrib.auth.models import Permission, User
    from django.contrib.sessions.models import Session

    from agent_handshake.models import AgentRequest

    with django_db_blocker.unblock():
        for _ in range(3):
            AgentRequest.objects.create(at=timezone.now(), protocol="ahp", capability="content_search",
                                        outcome="no_answer", status=200, latency_ms=40, agent_kind="anonymous",
                                        agent=LONG_NAME, question=LONG_QUESTION)  # fmt: skip
        owner = User.objects.create_user("long-names-owner", password="a long enough password", is_staff=True)
        owner.user_permissions.add(Permission.objects.get(codename="view_insights"))
    yield
    with django_db_blocker.unblock():
        AgentRequest.objects.filter(agent=LONG_NAME).delete()
        Session.objects.all().delete()
        owner.delete()


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_a_long_agent_name_stays_in_its_table_on_the_traffic_pages(long_named_traffic):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    with serve("gunicorn (WSGI)", "") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/admin/login/?next=/admin/agent_handshake/agentrequest/")
        page.get_by_label("Username").fill("long-names-owner")
        page.get_by_label("Password").fill("a long enough password")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("heading", name="Agent traffic").wait_for()
        top = page.locator("#top-agents").get_by_role("link", name=LONG_NAME, exact=True)
        assert top.is_visible()  # whole, not cut
        assert page.evaluate(OVERFLOWS) == []
        top.click()
        page.locator("#agent-name").wait_for()
        assert page.locator("#agent-name").text_content() == LONG_NAME
        assert page.evaluate(OVERFLOWS) == []
        browser.close()
