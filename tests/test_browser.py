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

from tests.test_nlweb_live import serve

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


ARTIFACTS = Path(os.environ.get("AGENT_HANDSHAKE_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))


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
    from tests.test_mcp import tasting_booking

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
