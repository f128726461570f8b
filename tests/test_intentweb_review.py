"""IntentWeb defects a review found (the flows, the page for people, the manifest), each with a test that failed
before its fix."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from demo_site.shop.models import Appointment
from tests.test_mcp import tasting_booking

pytestmark = pytest.mark.django_db


def page_visitor(address: str) -> tuple[Client, dict]:
    """A browser at ``address`` that has opened the intent page: its client and the headers its script sends."""
    browser = Client(enforce_csrf_checks=True, REMOTE_ADDR=address)
    assert browser.get("/intent-ui/").status_code == 200
    return browser, {"HTTP_X_CSRFTOKEN": browser.cookies["csrftoken"].value}


def page_says(browser: Client, headers: dict, body: dict) -> tuple[int, dict]:
    response = browser.post("/intent-ui/message", json.dumps(body), content_type="application/json", **headers)
    return response.status_code, response.json()


def test_one_page_visitor_cannot_use_up_every_visitors_booking_limit(demo_content, settings):
    """Every visitor of the page acts with the page's one key, so a capability's own limit (ACTION_RATE_LIMIT) was
    counted for that key: one visitor who sent a few bookings left every other visitor 429 for the rest of the
    window. The page's limits count per client address (README), the capability's too."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "ACTION_RATE_LIMIT": "2/minute"}
    booking = tasting_booking()
    fields = {name: booking[name] for name in ("service", "date", "time", "name", "email")}
    busy, busy_headers = page_visitor("203.0.113.7")
    for time in ("11:00", "14:00", "15:00"):
        status, reply = page_says(busy, busy_headers, {"message": "Book a tea-tasting",
                                                       "collected_information": {**fields, "time": time}})  # fmt: skip
    assert status == 429, reply  # the busy visitor's own budget is spent
    assert reply["status"] == "rate_limited"
    other, other_headers = page_visitor("198.51.100.20")
    status, reply = page_says(other, other_headers, {"message": "Book a tea-tasting",
                                                     "collected_information": {**fields, "time": "16:00"}})  # fmt: skip
    assert status == 200, reply
    assert reply["flow_type"] == "execution_result"
    assert Appointment.objects.count() == 3
