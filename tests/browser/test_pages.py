"""The pages people use, in a real browser: the API reference (Swagger UI over /openapi.json, its scripts served
by the app from drf-spectacular-sidecar) rendered by headless Chromium against a live server, and the intent page
(/intent-ui/) used to book an appointment. Chromium is Debian's
(``make install-test`` installs it when it can); without it the test is skipped and says why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.nlweb.test_live_servers import serve

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_the_api_reference_renders_every_front_door_in_a_browser(demo_content, tmp_path):
    with serve("gunicorn (WSGI)", "", AGENT_HANDSHAKE_TEST_API_DOCS="1") as url:
        command = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{url}/agent/api-docs/",
        ]
        dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    # The page itself names none of these: they are in the DOM only once Swagger UI ran, fetched /openapi.json
    # and rendered its operations.
    for path in ("/agent/converse", "/capabilities/check_inventory", "/capabilities/book_appointment", "/ask",
                 "/mcp", "/.well-known/agent.json"):  # fmt: skip
        assert f'data-path="{path}"' in dom, path
    assert "Test Site" in dom  # info.title, from the site profile


ARTIFACTS = Path(os.environ.get("AGENT_HANDSHAKE_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))


@pytest.fixture(scope="module")
def written_by_the_server(django_db_blocker):
    """Deletes, after this module, what the live server committed (the test's own transaction cannot)."""
    yield
    from django.contrib.sessions.models import Session

    from agent_handshake.models import AgentClient, IdempotencyRecord, IntentNonce, Interaction
    from demo_site.shop.models import Appointment

    with django_db_blocker.unblock():
        for model in (Appointment, Interaction, IntentNonce, IdempotencyRecord, Session):
            model.objects.all().delete()
        AgentClient.objects.filter(name="Intent page (this site)").delete()


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_a_person_books_a_tasting_on_the_intent_page(demo_content, written_by_the_server):
    """/intent-ui/ in headless Chromium driven by Playwright, as a person uses it with the keyboard: from the first
    message to the confirmation, the booking really made; a screenshot of the confirmation is kept as an artefact
    (test-artifacts/, or AGENT_HANDSHAKE_ARTIFACTS)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    from agent_handshake.models import Interaction
    from demo_site.shop.models import Appointment
    from tests.mcp.test_mcp import tasting_booking

    booking = tasting_booking()
    with serve("gunicorn (WSGI)", "") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page()
        page.goto(f"{url}/intent-ui/")
        assert page.title() == "What would you like to do?"
        page.get_by_label("Tell us what you would like, in your own words").fill("I'd like to book a tea-tasting")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")  # the Send button, by keyboard
        # The form the site asked for: labelled fields, the first one focused.
        date = page.get_by_label("Date")
        date.wait_for()
        assert page.evaluate("document.activeElement.id") == "field-date"
        assert "The day" in page.locator("#field-date-hint").text_content()
        date.fill(booking["date"])
        page.get_by_label("Time").fill("11:00")
        page.get_by_label("Name").fill("Grace Hopper")
        page.get_by_label("Email").fill("grace@example.com")
        page.get_by_role("button", name="Continue").click()
        heading = page.get_by_role("heading", name="Done")
        heading.wait_for()
        assert page.evaluate("document.activeElement.id") == "result-heading"
        conversation = page.get_by_role("log").text_content()
        assert "Booked:" in conversation
        assert "- Service: tea-tasting" in conversation  # what the site understood, as text
        reference = page.locator("#result-details dd").first.text_content()
        assert page.get_by_role("status").text_content().startswith("Booked:")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "intent-ui-booking.png"), full_page=True)
        browser.close()
    # Committed by the server, so this test's transaction sees it.
    appointment = Appointment.objects.get(name="Grace Hopper")
    assert appointment.reference == reference
    assert appointment.service == "tea-tasting"
    assert appointment.date.isoformat() == booking["date"]
    assert Interaction.objects.get(external_id=reference).status == Interaction.Status.DONE


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_the_intent_page_says_when_the_site_cannot_answer_and_lets_the_person_try_again(demo_content):
    """A reply that is no IntentWeb envelope (a JSON 503 while the site's signing key does not load) is shown as the
    problem it is, and the form stays there to try again: the page hid every form, a dead end."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    broken = {"AGENT_HANDSHAKE_TEST_SITE_PRIVATE_KEY": "garbage"}
    logged = "The site key cannot be loaded"  # for the operator, with its traceback
    with serve("gunicorn (WSGI)", "", logged, **broken) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page()
        page.goto(f"{url}/intent-ui/")
        message = page.get_by_label("Tell us what you would like, in your own words")
        message.fill("Is LK-TEA-0001 in stock?")
        page.get_by_role("button", name="Send").click()
        problem = page.locator("#conversation li.site.problem")
        problem.wait_for()
        assert "signing key" in problem.text_content()
        assert message.is_visible()  # the person may send it again
        assert page.evaluate("document.activeElement.id") == "message"
        browser.close()


@pytest.fixture(scope="module")
def committed_traffic(django_db_setup, django_db_blocker):
    """Agent traffic a live server can see (committed, the closed days aggregated) and a staff member allowed to
    read it; all deleted after the module."""
    from django.contrib.auth.models import Permission, User
    from django.contrib.sessions.models import Session

    from agent_handshake.insights.aggregation import run_daily, site_today
    from agent_handshake.models import AgentRequest, DailyCitation, DailyTraffic, Document
    from tests.insights.test_aggregates import plant_documents, plant_traffic

    with django_db_blocker.unblock():
        planted = plant_traffic(site_today(), documents=plant_documents(prefix="browser-insights"))
        run_daily()
        owner = User.objects.create_user("insights-owner", password="a long enough password", is_staff=True)
        owner.user_permissions.add(Permission.objects.get(codename="view_insights"))
    yield planted
    with django_db_blocker.unblock():
        for model in (AgentRequest, DailyTraffic, DailyCitation, Session):
            model.objects.all().delete()
        Document.objects.filter(pk__in=[document.pk for document in planted.documents]).delete()
        owner.delete()


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_an_owner_reads_the_agent_traffic_pages(committed_traffic):
    """The admin's agent traffic pages in headless Chromium, as an owner with the permission reads them: log in,
    the overview's totals and charts, an agent's page from the top agents, the content gaps; no script an agent
    named itself runs. Screenshots are kept as artefacts."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    planted = committed_traffic
    finder = [row for row in planted.rows if row.agent == "Tea Finder"]
    with serve("gunicorn (WSGI)", "") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(f"{url}/admin/login/?next=/admin/")
        page.get_by_label("Username").fill("insights-owner")
        page.get_by_label("Password").fill("a long enough password")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("link", name="Agent requests").click()

        # The click starts the navigation; the check must wait for the page it leads to (is_visible does not wait).
        page.get_by_role("heading", name="Agent traffic").wait_for()
        assert page.locator("#total-requests").text_content() == str(len(planted.rows))
        rate_limited = sum(row.outcome == "rate_limited" for row in planted.rows)
        assert page.locator("#total-rate-limited").text_content() == str(rate_limited)
        charts = page.locator("svg[role=img]")
        assert charts.count() == 5
        assert page.locator("#chart-protocol rect.bar").count() >= len(planted.days)  # a bar for every day
        box = page.locator("#chart-protocol svg").bounding_box()
        assert box is not None
        assert box["width"] > 300  # drawn, not collapsed
        assert page.get_by_role("img", name="Requests per day by outcome").is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "insights-overview.png"), full_page=True)

        page.locator("#top-agents").get_by_role("link", name="Tea Finder", exact=True).click()
        page.get_by_role("heading", name="Agent: Tea Finder").wait_for()
        assert page.locator("#total-requests").text_content() == str(len(finder))
        limited = sum(row.outcome == "rate_limited" for row in finder)
        assert page.locator("#total-rate-limited").text_content() == str(limited)
        assert "book a tasting" in page.locator("#recent").text_content()
        page.screenshot(path=str(ARTIFACTS / "insights-agent.png"), full_page=True)

        page.go_back()
        gaps = page.get_by_role("link", name="Content gaps")
        if gaps.count():  # the content gaps' admin (agent_handshake/insights/gaps_admin.py)
            gaps.first.click()
            page.wait_for_load_state()
            assert page.locator("#content h1").first.is_visible()
            page.screenshot(path=str(ARTIFACTS / "insights-content-gaps.png"), full_page=True)
        browser.close()
    assert dialogs == []  # the agent named "<script>alert('x')</script> bot" ran nothing
