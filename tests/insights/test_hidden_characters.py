"""What agents send, shown to the site's operators on the agent traffic pages: a declared agent name and a recorded
question keep no character that does not show but changes what is shown (a right-to-left override reordering the
line, zero-width and tag characters making two names look alike or hiding words, terminal control codes).

Real requests through Django's test client on the demo content, the records written with ``recording.flush()``,
and the admin pages read as an owner with the ``view_insights`` permission."""

from __future__ import annotations

import csv
import io
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from agent_handshake.insights import recording
from agent_handshake.models import AgentRequest
from tests.insights.test_admin_pages import staff
from tests.insights.test_recording import converse

pytestmark = pytest.mark.usefixtures("empty_buffer")

#: A right-to-left override and its pop, an isolate, marks, zero-width characters, a byte-order mark, a tag
#: character (invisible "ASCII smuggling"), a bell and an escape sequence.
HIDDEN = "\u202e\u202c\u2066\u2069\u200e\u200f\u200b\u200c\u200d\u2060\ufeff\U000e0041\x07\x1b"


def hidden_in(text: str) -> list[str]:
    return sorted({f"U+{ord(char):04X}" for char in text if char in HIDDEN})


def recorded(client, settings, name: str, question: str) -> AgentRequest:
    """The record of ``question``, asked by an agent calling itself ``name``, the site recording questions."""
    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "INSIGHTS_RECORD_QUESTIONS": True}
    assert converse(client, question, context={"requesting_agent": name}).status_code == 200
    recording.flush()
    return AgentRequest.objects.get()


def shown_to_the_owner(client, row: AgentRequest) -> tuple[str, str]:
    """The agent traffic overview and the page of ``row``'s agent, as the owner (``view_insights``) reads them."""
    client.force_login(staff("owner", insights=True))
    overview = client.get(reverse("admin:agent_handshake_agentrequest_changelist"))
    assert overview.status_code == 200
    page = client.get(reverse("admin:agent_handshake_insights_agent") + "?" + urlencode({"agent": row.agent}))
    assert page.status_code == 200
    return overview.content.decode(), page.content.decode()


def test_an_agents_name_and_question_show_operators_no_hidden_characters(client, db, demo_content, settings):
    # Shown as it is, "\u202emoc.elgoog\u202c" reads "google.com" to the operator.
    name = "\u202emoc.elgoog\u202c \x07Tea\u200bFinder\U000e0041"
    question = "How \u2066should\u2069 I brew \x1b[31mhojicha\u200d\ufeff?\U000e0049\U000e0067\U000e006e"
    row = recorded(client, settings, name, question)
    overview, page = shown_to_the_owner(client, row)
    assert "moc.elgoog TeaFinder @ 203.0.113.0/24</a>" in overview
    assert hidden_in(overview) == []
    assert "How should I brew [31mhojicha?" in page
    assert hidden_in(page) == []
    export = client.get(reverse("admin:agent_handshake_insights_csv")).content.decode()
    assert [line["agent"] for line in csv.DictReader(io.StringIO(export))] == [row.agent]
    assert hidden_in(export) == []
    assert (row.agent, row.question) == ("moc.elgoog TeaFinder @ 203.0.113.0/24", "How should I brew [31mhojicha?")


def test_an_agents_name_and_question_keep_the_joiners_and_superscripts_they_are_written_with(
    client, db, demo_content, settings
):
    """A ZWNJ inside a Persian word and a ZWJ inside an emoji are part of what shows, and "10⁶" is not "106": the
    operator reads them as sent."""
    name = "چای\u200cیاب \U0001f469\u200d\U0001f4bb"
    question = "Is 10⁶ ppm of CO₂ what می\u200cخواهم means?"
    row = recorded(client, settings, name, question)
    assert (row.agent, row.question) == (f"{name} @ 203.0.113.0/24", question)
    overview, page = shown_to_the_owner(client, row)
    assert f"{name} @ 203.0.113.0/24</a>" in overview
    assert question in page
