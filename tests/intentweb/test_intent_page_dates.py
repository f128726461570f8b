"""The intent page (/intent-ui/) takes a day a person says in words ("tomorrow", "next Friday") in the request they
type, as the site's calendar counts it, and says which day it took; an agent at /intent states dates as YYYY-MM-DD
(the manifest asks for that), for its user's calendar, which the site cannot know. Through the page's own endpoint
with Django's test client, and in headless Chromium against a live server, as tests/browser/test_pages.py does."""

from __future__ import annotations

import datetime
import json

import pytest
from django.test import Client
from django.utils import timezone

from tests.browser.test_pages import CHROMIUM, written_by_the_server  # noqa: F401 (a fixture)
from tests.intentweb.test_intentweb import Agent, key
from tests.nlweb.test_live_servers import serve

pytestmark = pytest.mark.django_db


def after(today: datetime.date, weekday: int) -> datetime.date:
    """The first day after ``today`` that is ``weekday`` (Monday 0)."""
    return today + datetime.timedelta(days=(weekday - today.weekday()) % 7 or 7)


def say(browser: Client, body: dict) -> tuple[int, dict]:
    token = browser.cookies["csrftoken"].value
    response = browser.post("/intent-ui/message", json.dumps(body), content_type="application/json",
                            HTTP_X_CSRFTOKEN=token)  # fmt: skip
    return response.status_code, response.json()


def page() -> Client:
    browser = Client(enforce_csrf_checks=True)
    assert browser.get("/intent-ui/").status_code == 200
    return browser


@pytest.mark.parametrize(
    ("words", "ahead"),
    [
        ("tomorrow", lambda today: today + datetime.timedelta(days=1)),
        ("the day after tomorrow", lambda today: today + datetime.timedelta(days=2)),
        ("next Friday", lambda today: after(today, 4)),
        ("on saturday", lambda today: after(today, 5)),
        ("Tuesday", lambda today: after(today, 1)),
    ],
)
def test_the_page_takes_a_day_said_in_words_and_says_which(demo_content, words, ahead):
    """Said in the request, the day was not read at all: the person who wrote "tomorrow" was asked for the date."""
    day = ahead(timezone.localdate())
    status, reply = say(page(), {"message": f"I'd like to book a tea-tasting {words} at 11:00"})
    assert status == 200, reply
    assert reply["flow_type"] == "information_request", reply
    assert reply["collected_information"]["date"] == day.isoformat()
    assert "date" not in reply["required_fields"]
    assert f"I took “{words}” as {day:%A} {day.day} {day:%B %Y}." in reply["message"]


@pytest.mark.parametrize(
    "message",
    [
        "I'd like to book a tea-tasting at 11:00, my address is today@example.com",
        "I'd like to book a tea-tasting on Friday or Saturday at 11:00",
        "I'd like to book a tea-tasting at 11:00 with my friend Tuesday-Lobsang",
    ],
)
def test_the_page_reads_no_day_from_an_address_a_name_or_two_days(demo_content, message):
    status, reply = say(page(), {"message": message})
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    assert "date" in reply["required_fields"]
    assert "date" not in reply["collected_information"]


def test_the_page_reads_words_only_in_the_request_not_in_its_answers(demo_content):
    """The form's answers come from its fields (a date picker for the date): a name is not a day."""
    browser = page()
    status, reply = say(browser, {"message": "I'd like to book a tea-tasting tomorrow at 11:00"})
    tomorrow = timezone.localdate() + datetime.timedelta(days=1)
    assert reply["collected_information"]["date"] == tomorrow.isoformat()
    status, reply = say(browser, {"interaction_id": reply["interaction_id"], "message": "Name: Ada Sunday",
                                  "collected_information": {"name": "Ada Sunday"}})  # fmt: skip
    assert status == 200, reply
    assert reply["collected_information"]["date"] == tomorrow.isoformat()


def test_an_agent_states_its_dates_as_the_manifest_asks(client, demo_content):
    """At /intent the words are not read: "tomorrow" is the agent's user's, in a time zone the site cannot know."""
    agent = Agent(client, secret=key())
    status, reply = agent.send("intent_request", "I'd like to book a tea-tasting tomorrow at 11:00")
    assert (status, reply["flow_type"]) == (200, "information_request"), reply
    assert "date" in reply["required_fields"]
    assert "date" not in reply["collected_information"]


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine: `apt-get install chromium` (make install-test)")
def test_a_person_books_a_tasting_for_a_day_said_in_words(demo_content, written_by_the_server):  # noqa: F811
    """/intent-ui/ in headless Chromium (Playwright), by keyboard and labels: the person writes the day in words, is
    told which day that is, is asked only for what is still missing, and the booking is made for that day."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make install-test)")
    from demo_site.shop.models import Appointment

    today = timezone.localdate()
    day = today + datetime.timedelta(days=1)
    while day.weekday() in (0, 6):  # the shop opens Tuesday to Saturday
        day += datetime.timedelta(days=1)
    words = "tomorrow" if day == today + datetime.timedelta(days=1) else f"next {day:%A}"
    with serve("gunicorn (WSGI)", "") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        tab = browser.new_page()
        tab.goto(f"{url}/intent-ui/")
        tab.get_by_label("Tell us what you would like, in your own words").fill(
            f"I'd like to book a tea-tasting {words} at 11:00"
        )
        tab.keyboard.press("Tab")
        tab.keyboard.press("Enter")
        name = tab.get_by_label("Name")
        name.wait_for()
        assert tab.evaluate("document.activeElement.id") == "field-name"
        assert tab.locator("#field-date").count() == 0  # the day is not asked for again
        conversation = tab.get_by_role("log").text_content()
        assert f"I took “{words}” as {day:%A} {day.day} {day:%B %Y}." in conversation
        name.fill("Katherine Johnson")
        tab.get_by_label("Email").fill("katherine@example.com")
        tab.keyboard.press("Enter")  # submits the form from its last field
        tab.get_by_role("heading", name="Done").wait_for()
        assert "Booked:" in tab.get_by_role("log").text_content()
        browser.close()
    appointment = Appointment.objects.get(name="Katherine Johnson")
    assert appointment.date == day
    assert appointment.time == datetime.time(11, 0)
