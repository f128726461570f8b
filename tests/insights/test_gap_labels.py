"""A content gap is named by an agent's question (up to 1000 characters once recorded): the list of gaps shows each
name cut short, the whole question on the gap's own page. Shown whole, one long question, or one long word (a
pasted link, a run of characters) that a table cannot wrap, made its row fill the screen or the table run off it.

The gaps are made by the gap run from recorded questions (``tests/insights/test_gaps.ask``) and read in the admin
as staff with the ``view_insights`` permission, through Django's test client."""

from __future__ import annotations

import html as htmllib
import re

import pytest

from agent_handshake.insights.gaps import update_gaps
from agent_handshake.insights.recording import MAX_QUESTION_CHARS
from agent_handshake.models import ContentGap
from tests.insights.test_gaps import CHANGELIST, ask, staff

#: The most of a gap's name its row in the list shows.
SHOWN = 100


def label_cell(page: str, gap: ContentGap) -> str:
    row = next(row for row in page.split("<tr") if f"/{gap.pk}/change/" in row)
    cell = re.search(r'<th class="field-\w+"><a href="[^"]*">(.*?)</a></th>', row, flags=re.S)
    assert cell, row
    return htmllib.unescape(cell.group(1))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "question",
    [
        " ".join(["Could you tell me whether your ceremonial matcha is shade grown and stone ground"] * 20),
        "Is this your page? https://tea.example/" + "a" * 2000,
    ],
    ids=["long question", "long word"],
)
def test_the_list_of_gaps_shows_a_long_question_cut_short(client, demo_content, question):
    ask(question[:MAX_QUESTION_CHARS], 1)  # as recorded
    update_gaps()
    gap = ContentGap.objects.get()
    assert len(gap.label) == MAX_QUESTION_CHARS
    client.force_login(staff("reader", "view_insights"))
    page = client.get(CHANGELIST)
    assert page.status_code == 200
    shown = label_cell(page.content.decode(), gap)
    assert len(shown) <= SHOWN, len(shown)
    assert shown.endswith("…")
    assert gap.label.startswith(shown.removesuffix("…").rstrip())
    # The whole question is on the gap's page.
    detail = client.get(f"{CHANGELIST}{gap.pk}/change/")
    assert detail.status_code == 200
    assert gap.label in htmllib.unescape(detail.content.decode())
