"""The owners' agent traffic pages in the admin, through Django's test client: who may see them, the planted
numbers on the overview, the SVG charts, escaping of what agents sent, the CSV export and bad date ranges."""

from __future__ import annotations

import csv
import datetime
import io
import re
import xml.etree.ElementTree as ET
from collections import Counter
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from agent_handshake.insights.aggregation import run_daily, site_today
from agent_handshake.insights.charts import OUTCOME_COLOURS
from tests.insights.test_aggregates import FORMULA_AGENT, HOSTILE_AGENT, plant_traffic

pytestmark = pytest.mark.django_db

OVERVIEW = "admin:agent_handshake_agentrequest_changelist"
AGENT = "admin:agent_handshake_insights_agent"
CSV = "admin:agent_handshake_insights_csv"


def staff(username: str, *, insights: bool) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    if insights:
        user.user_permissions.add(Permission.objects.get(codename="view_insights"))
    return user


@pytest.fixture
def planted():
    planted = plant_traffic(site_today())
    run_daily()  # the three closed days aggregated, today's rows read raw
    return planted


@pytest.fixture
def owner(client):
    client.force_login(staff("owner", insights=True))
    return client


def text_of(html: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}">([^<]*)<', html)
    assert match, element_id
    return match.group(1)


def svgs(html: str) -> list[ET.Element]:
    charts = re.findall(r"<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\".*?</svg>", html, flags=re.S)
    return [ET.fromstring(svg) for svg in charts]


def test_staff_without_the_permission_get_403_everywhere(client, planted):
    client.force_login(staff("clerk", insights=False))
    for url in (
        reverse(OVERVIEW),
        reverse(AGENT) + "?" + urlencode({"agent": "Tea Finder"}),
        reverse(CSV),
        reverse(CSV) + "?start=2024-01-01&end=2024-01-31",
    ):
        assert client.get(url).status_code == 403, url
    index = client.get(reverse("admin:index")).content.decode()
    assert reverse(OVERVIEW) not in index


def test_a_superuser_and_a_granted_staff_member_see_it(client, planted):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.get(reverse(OVERVIEW)).status_code == 200
    client.force_login(staff("owner", insights=True))
    index = client.get(reverse("admin:index")).content.decode()
    assert reverse(OVERVIEW) in index  # listed on the admin's index


def test_the_overview_shows_the_planted_numbers(owner, planted):
    response = owner.get(reverse(OVERVIEW))
    assert response.status_code == 200
    html = response.content.decode()
    rows = planted.rows
    assert text_of(html, "total-requests") == str(len(rows))
    assert text_of(html, "total-tokens") == str(sum(row.tokens for row in rows))
    assert text_of(html, "total-cached") == str(sum(row.cached for row in rows))
    assert text_of(html, "total-rate-limited") == str(sum(row.outcome == "rate_limited" for row in rows))
    assert text_of(html, "total-errors") == str(sum(row.outcome == "error" for row in rows))

    # The top agents link to their pages, with their request counts.
    finder = sum(row.agent == "Tea Finder" for row in rows)
    link = reverse(AGENT) + "?" + urlencode({"start": planted.days[-1] - datetime.timedelta(days=13)})
    assert link in html
    assert re.search(rf"agent=Tea%20Finder\">Tea Finder</a></th>\s*<td class=\"number\">{finder}</td>", html)
    # Pages: the never-cited one is listed as such, the most cited one first among the cited.
    cited = Counter(document for row in rows for document in row.sources)
    top = max(planted.documents, key=lambda document: cited[document.pk])
    top_cited = html.split('id="top-cited"')[1].split("</table>")[0]
    assert top_cited.index(top.title) < min(
        top_cited.index(document.title) for document in planted.documents[:-1] if document != top
    )
    assert f">{cited[top.pk]}</td>" in top_cited
    never = html.split('id="never-cited"')[1].split("</table>")[0]
    assert planted.documents[-1].title in never
    assert planted.documents[0].title not in never


def test_the_charts_are_well_formed_svg_with_the_numbers(owner, planted):
    html = owner.get(reverse(OVERVIEW)).content.decode()
    charts = svgs(html)
    assert len(charts) == 5
    ns = {"svg": "http://www.w3.org/2000/svg"}
    for chart in charts:
        assert chart.get("role") == "img"
        assert chart.find("svg:title", ns).text
    by_protocol = charts[0]
    bars = by_protocol.findall(".//svg:rect[@class='bar']", ns)
    today = planted.days[-1]
    per_protocol = Counter(row.protocol for row in planted.rows if row.at.date() == today)
    for protocol, count in per_protocol.items():
        titles = [bar.find("svg:title", ns).text for bar in bars]
        assert f"{today.isoformat()}, {protocol}: {count}" in titles
    # Each outcome has its own colour, whatever the range's traffic ranks first.
    by_outcome = charts[1]
    outcomes = {row.outcome for row in planted.rows}
    assert len(outcomes) > 1
    for bar in by_outcome.findall(".//svg:rect[@class='bar']", ns):
        outcome = bar.find("svg:title", ns).text.split(", ", 1)[1].split(":")[0]
        assert bar.get("fill") == OUTCOME_COLOURS[outcome], outcome
    # The table fallback carries each day's total.
    per_day = Counter(row.at.date() for row in planted.rows)
    for day, count in per_day.items():
        assert re.search(rf"<th scope=\"row\">{day.isoformat()}</th>(<td>\d+</td>)+<td>{count}</td></tr>", html)


def test_what_agents_sent_is_escaped(owner, planted):
    html = owner.get(reverse(OVERVIEW)).content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; bot" in html
    page = owner.get(reverse(AGENT) + "?" + urlencode({"agent": HOSTILE_AGENT})).content.decode()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert" in page
    assert int(text_of(page, "total-requests")) == sum(row.agent == HOSTILE_AGENT for row in planted.rows)


def test_the_csv_export_matches_and_neutralises_formulas(owner, planted):
    start, end = planted.days[0], planted.days[-1]
    response = owner.get(reverse(CSV), {"start": start.isoformat(), "end": end.isoformat()})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sum(int(row["requests"]) for row in rows) == len(planted.rows)
    assert sum(int(row["tokens"]) for row in rows) == sum(row.tokens for row in planted.rows)
    per_day_protocol = Counter()
    for row in rows:
        per_day_protocol[(row["day"], row["protocol"])] += int(row["requests"])
    assert per_day_protocol == Counter((row.at.date().isoformat(), row.protocol) for row in planted.rows)
    agents = {row["agent"] for row in rows}
    assert FORMULA_AGENT not in agents
    assert "'" + FORMULA_AGENT in agents
    assert all(not agent.startswith(("=", "+", "-", "@")) for agent in agents)


def test_an_agents_page_shows_its_errors_and_limits(owner, planted):
    response = owner.get(reverse(AGENT), {"agent": "Tea Finder"})
    assert response.status_code == 200
    html = response.content.decode()
    mine = [row for row in planted.rows if row.agent == "Tea Finder"]
    assert text_of(html, "total-requests") == str(len(mine))
    assert text_of(html, "total-errors") == str(sum(row.outcome == "error" for row in mine))
    assert text_of(html, "total-rate-limited") == str(sum(row.outcome == "rate_limited" for row in mine))
    problems = html.split('id="problems"')[1].split("</table>")[0]
    limited_today = sum(
        row.outcome == "rate_limited" and row.capability == "book_appointment" and row.at.date() == planted.days[-1]
        for row in mine
    )
    assert re.search(
        rf"<td>{planted.days[-1].isoformat()}</td><td>book_appointment</td><td>rate_limited</td>"
        rf"<td class=\"number\">{limited_today}</td>",
        problems,
    )
    recent = html.split('id="recent"')[1]
    assert "book a tasting" in recent
    assert "429" in recent
    assert all(len(svg.findall(".//{http://www.w3.org/2000/svg}rect")) for svg in svgs(html))


@pytest.mark.parametrize(
    "query",
    [
        {"start": "yesterday"},
        {"start": "2024-02-30"},
        {"start": "2024-03-10", "end": "2024-03-01"},
        {"start": "1990-01-01", "end": "2024-01-01"},
        {"end": "99999-01-01"},
        {"end": "9999-12-31"},
        {"start": "0001-01-01", "end": "0001-01-05"},
        {"start": "2024-01-01", "end": "2024-01-01\x00"},
        {"end": "0001-01-05"},  # no start: the default one would be before date.min
    ],
)
def test_bad_dates_are_form_errors(owner, planted, query):
    response = owner.get(reverse(OVERVIEW), query)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="errornote"' in html
    assert text_of(html, "total-requests") == str(len(planted.rows))  # the default range instead
    agent_page = owner.get(reverse(AGENT), {**query, "agent": "Tea Finder"})
    assert agent_page.status_code == 200
    assert 'class="errornote"' in agent_page.content.decode()
    assert owner.get(reverse(CSV), query).status_code == 400


def test_an_agent_page_needs_an_agent(owner, planted):
    assert owner.get(reverse(AGENT)).status_code == 404
    assert owner.get(reverse(AGENT), {"agent": "x" * 500}).status_code == 404
    assert owner.get(reverse(AGENT), {"agent": "Tea\x00Finder"}).status_code == 404  # no row can hold a NUL
    unknown = owner.get(reverse(AGENT), {"agent": "nobody"})
    assert unknown.status_code == 200
    assert text_of(unknown.content.decode(), "total-requests") == "0"


def test_the_pages_are_read_only(owner, planted):
    html = owner.get(reverse(OVERVIEW)).content.decode()
    assert "/add/" not in html.split('id="content-main"')[1]
    user = User.objects.get(username="owner")
    from django.contrib.admin.sites import site

    from agent_handshake.models import AgentRequest

    model_admin = site._registry[AgentRequest]
    request = type("R", (), {"user": user})()
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
