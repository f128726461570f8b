"""Content gaps: the questions the site could not answer, grouped by meaning with the site's real embedding model
(all-MiniLM-L6-v2) over the demo site's indexed content, and their admin pages.

The planted questions are hand-written paraphrases, distinct from the development set the similarity threshold
was chosen on (README, ``INSIGHTS_GAP_SIMILARITY``)."""

from __future__ import annotations

import contextlib
import datetime
import re
import threading

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.db.models import Sum
from django.test import override_settings

from agent_handshake.insights.gaps import LOCK, update_gaps
from agent_handshake.models import AgentRequest, ContentGap, Document, Outcome

THEMES = {
    "shipping to the EU": [
        "Do you ship to the EU?",
        "Can I order tea for delivery to Germany?",
        "How much is shipping to France?",
        "Do you deliver to European countries?",
        "Is shipping available to Spain or Italy?",
        "Can you send an order to the Netherlands?",
    ],
    "gift cards": [
        "Do you sell gift cards?",
        "Can I buy a gift card for my sister?",
        "Are there digital gift vouchers?",
        "How do I use a gift card at checkout?",
        "Do gift cards have an expiry date?",
    ],
    "loyalty": [
        "Do you have a loyalty program?",
        "Can I collect loyalty points?",
        "Is there a rewards scheme for returning customers?",
        "How do loyalty rewards work?",
    ],
}
#: Paraphrases with few words in common: the model does not always see them as one question (README,
#: ``INSIGHTS_GAP_SIMILARITY``), so they may split into several gaps; they must not land in another theme's gap.
HARD = [
    "Are you hiring?",
    "Do you have any job openings?",
    "How can I apply to work at your shop?",
    "Are there jobs available in the tasting room?",
    "Where can I send my CV for a job?",
]
ONE_OFFS = [
    "Can I bring my dog into the shop?",
    "Who built your website?",
    "What music do you play in the shop?",
    "Do you have public restrooms?",
]
START = datetime.datetime(2026, 3, 2, 9, 0, tzinfo=datetime.UTC)


def ask(question: str, minutes: int = 0, *, outcome: str = Outcome.NO_ANSWER, weak: bool = False) -> AgentRequest:
    return AgentRequest.objects.create(
        at=START + datetime.timedelta(minutes=minutes),
        protocol="ahp",
        capability="content_search",
        outcome=outcome,
        status=200,
        latency_ms=40,
        weak=weak,
        agent_kind="anonymous",
        agent="bot @ 203.0.113.0/24",
        question=question,
    )


def plant() -> dict[str, list[AgentRequest]]:
    """The themes' questions interleaved in time (as traffic comes), half of them no-answer, half weak matches."""
    planted: dict[str, list[AgentRequest]] = {theme: [] for theme in THEMES}
    minute = 0
    for position in range(max(len(questions) for questions in THEMES.values())):
        for theme, questions in THEMES.items():
            if position < len(questions):
                weak = position % 2 == 1
                outcome = Outcome.SUCCESS if weak else Outcome.NO_ANSWER
                planted[theme].append(ask(questions[position], minute, outcome=outcome, weak=weak))
                minute += 7
    planted["hard"] = [ask(question, 200 + i) for i, question in enumerate(HARD)]
    planted["one-offs"] = [ask(question, 300 + i) for i, question in enumerate(ONE_OFFS)]
    return planted


def gap_of(rows: list[AgentRequest]) -> set[int | None]:
    return {row.gap_id for row in AgentRequest.objects.filter(pk__in=[row.pk for row in rows])}


@pytest.fixture
def grouped(demo_content, db):
    """The planted questions, grouped once, plus answered and unusable requests that must stay untouched."""
    planted = plant()
    ignored = [
        ask("How do I brew gyokuro?", 5, outcome=Outcome.SUCCESS),  # answered well
        ask("Do you ship to the EU?", 6, outcome=Outcome.CLARIFICATION),  # asked back, not a gap
        ask("", 7),  # the site records no questions: nothing to group
        ask("Do you ship to Austria?", 8, outcome=Outcome.ERROR),
    ]
    grouped = update_gaps(now=START + datetime.timedelta(days=1))
    return planted, ignored, grouped


@pytest.mark.django_db
def test_unanswered_questions_become_one_gap_per_theme(grouped):
    planted, ignored, count = grouped
    assert count == sum(len(questions) for questions in THEMES.values()) + len(HARD) + len(ONE_OFFS)
    theme_gaps = {}
    for theme, questions in THEMES.items():
        gaps = gap_of(planted[theme])
        assert None not in gaps
        assert len(gaps) == 1, f"{theme} split into {len(gaps)} gaps"
        gap = ContentGap.objects.get(pk=gaps.pop())
        theme_gaps[theme] = gap
        assert gap.count == len(questions) == gap.requests.count()
        assert gap.label in questions
        assert gap.examples
        assert set(gap.examples) <= set(questions)
        assert gap.examples[-1] == questions[-1]  # most recent last
        assert gap.first_seen == planted[theme][0].at
        assert gap.last_seen == planted[theme][-1].at
        assert gap.status == ContentGap.Status.OPEN
    assert len({gap.pk for gap in theme_gaps.values()}) == len(THEMES)
    for row in planted["one-offs"]:
        row.refresh_from_db()
        assert row.gap_id not in {gap.pk for gap in theme_gaps.values()}
        assert row.gap.count == 1
        assert row.gap.label == row.question == row.gap.examples[0]
    hard_gaps = gap_of(planted["hard"])
    assert None not in hard_gaps
    assert not hard_gaps & {gap.pk for gap in theme_gaps.values()}
    assert max(ContentGap.objects.get(pk=pk).count for pk in hard_gaps) >= 3  # the closest wordings do meet
    for row in ignored:
        row.refresh_from_db()
        assert row.gap_id is None
        assert row.clustered_at is None
    assert ContentGap.objects.aggregate(total=Sum("count"))["total"] == count


@pytest.mark.django_db
def test_a_gap_names_its_nearest_indexed_page_and_how_similar_it_is(grouped):
    planted, _, _ = grouped
    shipping = ContentGap.objects.get(requests=planted["shipping to the EU"][0])
    document = Document.objects.get(pk=shipping.nearest_document_id)
    assert document.title == "Shipping and Returns"  # the page that says where the shop ships: not the EU
    assert document.passages.exists()
    assert 0.3 < shipping.nearest_score < 1
    assert all(gap.nearest_document_id and gap.nearest_score for gap in ContentGap.objects.all())


@pytest.mark.django_db
def test_new_questions_join_their_gaps_and_answered_gaps_reopen(grouped):
    planted, ignored, _ = grouped
    shipping, gifts, loyalty = (ContentGap.objects.get(requests=planted[theme][0]) for theme in THEMES)
    ContentGap.objects.filter(pk=shipping.pk).update(status=ContentGap.Status.ANSWERED)
    ContentGap.objects.filter(pk=gifts.pk).update(status=ContentGap.Status.DISMISSED)
    gaps_before = ContentGap.objects.count()
    later = [
        ask("Do you offer shipping to Ireland?", 2000),
        ask("Can I buy a gift card online?", 2001, outcome=Outcome.SUCCESS, weak=True),
    ]
    assert update_gaps(now=START + datetime.timedelta(days=3)) == 2
    assert ContentGap.objects.count() == gaps_before  # no duplicate gap
    shipping.refresh_from_db(), gifts.refresh_from_db(), loyalty.refresh_from_db()
    assert gap_of(later[:1]) == {shipping.pk}
    assert gap_of(later[1:]) == {gifts.pk}
    assert shipping.count == len(THEMES["shipping to the EU"]) + 1
    assert shipping.status == ContentGap.Status.OPEN
    assert shipping.last_seen == later[0].at
    assert shipping.examples[-1] == later[0].question
    assert len(shipping.examples) == 5  # capped, oldest dropped
    assert gifts.count == len(THEMES["gift cards"]) + 1
    assert gifts.status == ContentGap.Status.DISMISSED
    assert loyalty.count == len(THEMES["loyalty"])
    for row in ignored:
        row.refresh_from_db()
        assert row.gap_id is None
        assert row.clustered_at is None


@pytest.mark.django_db
def test_running_again_with_nothing_new_changes_nothing(grouped):
    fields = ("pk", "label", "count", "examples", "first_seen", "last_seen", "nearest_document", "nearest_score",
              "status", "model_id")  # fmt: skip
    before = list(ContentGap.objects.order_by("pk").values_list(*fields))
    rows = list(AgentRequest.objects.order_by("pk").values_list("pk", "gap", "clustered_at"))
    assert update_gaps() == 0
    assert list(ContentGap.objects.order_by("pk").values_list(*fields)) == before
    assert list(AgentRequest.objects.order_by("pk").values_list("pk", "gap", "clustered_at")) == rows


@contextlib.contextmanager
def gaps_lock_held_elsewhere():
    """The gap grouping's advisory lock held by another session (a thread's own connection) while the block runs."""
    held, release = threading.Event(), threading.Event()

    def other_run():
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(hashtext(%s))", [LOCK])
            held.set()
            release.wait(30)
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [LOCK])
        connections["default"].close()

    thread = threading.Thread(target=other_run)
    thread.start()
    try:
        assert held.wait(30)
        yield
    finally:
        release.set()
        thread.join()


@pytest.mark.django_db
def test_a_run_while_another_holds_the_lock_takes_nothing(demo_content):
    rows = [ask(question, i) for i, question in enumerate(THEMES["gift cards"])]
    with gaps_lock_held_elsewhere():
        assert update_gaps() == 0
        assert not AgentRequest.objects.filter(pk__in=[row.pk for row in rows]).exclude(clustered_at=None).exists()
        assert not ContentGap.objects.exists()
    assert update_gaps() == len(rows)
    assert ContentGap.objects.get().count == len(rows)


@pytest.mark.django_db
def test_gaps_of_another_embedding_model_are_recentred_from_their_examples(demo_content):
    examples = THEMES["shipping to the EU"][:3]
    old = ContentGap.objects.create(label=examples[0], examples=examples, count=3, centroid=[0.5] * 8,
                                    model_id="another/model", first_seen=START, last_seen=START)  # fmt: skip
    row = ask("Do you ship to the EU?", 50)
    assert update_gaps() == 1
    old.refresh_from_db()
    assert old.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(old.centroid) == 384
    assert gap_of([row]) == {old.pk}
    assert old.count == 4
    assert Document.objects.get(pk=old.nearest_document_id).title == "Shipping and Returns"


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="agent_handshake", codename__in=codenames)
    )
    return user


CHANGELIST = "/admin/agent_handshake/contentgap/"


@pytest.mark.django_db
def test_the_gaps_need_the_insights_permission(client, grouped):
    client.force_login(staff("editor", "view_contentgap", "change_contentgap"))
    assert client.get(CHANGELIST).status_code == 403
    gap = ContentGap.objects.order_by("-count").first()
    assert client.get(f"{CHANGELIST}{gap.pk}/change/").status_code == 403


@pytest.mark.django_db
@override_settings(AGENT_HANDSHAKE={"INSIGHTS_RECORD_QUESTIONS": True})
def test_the_list_shows_each_gap_with_its_count_and_nearest_page(client, grouped):
    planted, _, _ = grouped
    client.force_login(staff("reader", "view_insights"))
    page = client.get(CHANGELIST)
    assert page.status_code == 200
    html = page.content.decode()
    shipping = ContentGap.objects.get(requests=planted["shipping to the EU"][0])
    row = next(row for row in html.split("<tr") if f"/{shipping.pk}/change/" in row)
    assert shipping.label in row
    assert '<td class="field-count">6</td>' in row
    assert "Shipping and Returns</a>" in row
    assert f"match {shipping.nearest_score:.2f}" in row
    counts = [int(count) for count in re.findall(r'<td class="field-count">(\d+)</td>', html)]
    assert counts == sorted(counts, reverse=True)  # most asked first
    assert counts[0] == 6
    assert "Questions are not recorded" not in html
    assert client.get(f"{CHANGELIST}add/").status_code == 403
    detail = client.get(f"{CHANGELIST}{shipping.pk}/change/").content.decode()
    for example in shipping.examples:
        assert f"<li>{example}</li>" in detail


@pytest.mark.django_db
def test_the_list_says_when_questions_are_not_recorded(client):
    client.force_login(staff("reader", "view_insights"))
    html = client.get(CHANGELIST).content.decode()
    assert "Questions are not recorded on this site, so no content gaps can be found" in html
    assert "INSIGHTS_RECORD_QUESTIONS" in html


@pytest.mark.django_db
def test_questions_are_shown_escaped(client, demo_content):
    ask("<script>alert('gap')</script> do you ship to Mars?", 1)
    update_gaps()
    gap = ContentGap.objects.get()
    client.force_login(staff("reader", "view_insights"))
    for url in (CHANGELIST, f"{CHANGELIST}{gap.pk}/change/"):
        html = client.get(url).content.decode()
        assert "<script>alert(" not in html
        assert "&lt;script&gt;alert(" in html


@pytest.mark.django_db
def test_status_actions_need_the_change_permission(client, grouped):
    gap = ContentGap.objects.order_by("-count").first()

    def act(action: str):
        return client.post(CHANGELIST, {"action": action, "_selected_action": [gap.pk]})

    client.force_login(staff("reader", "view_insights"))
    assert "mark_answered" not in client.get(CHANGELIST).content.decode()
    act("dismiss")
    gap.refresh_from_db()
    assert gap.status == ContentGap.Status.OPEN
    client.force_login(staff("chief", "view_insights", "change_contentgap"))
    assert "mark_answered" in client.get(CHANGELIST).content.decode()
    assert act("dismiss").status_code == 302
    gap.refresh_from_db()
    assert gap.status == ContentGap.Status.DISMISSED
    act("reopen")
    gap.refresh_from_db()
    assert gap.status == ContentGap.Status.OPEN
    ContentGap.objects.filter(pk=gap.pk).update(nearest_document=None, nearest_score=None)
    act("mark_answered")
    gap.refresh_from_db()
    assert gap.status == ContentGap.Status.ANSWERED
    assert gap.nearest_document_id is not None  # measured again: the page written for it, once indexed


@pytest.mark.django_db
def test_a_nearest_page_that_is_no_web_address_is_not_a_link(client, grouped):
    gap = ContentGap.objects.exclude(nearest_document=None).order_by("-count").first()
    Document.objects.filter(pk=gap.nearest_document_id).update(url="javascript:alert(1)")
    client.force_login(staff("reader", "view_insights"))
    html = client.get(CHANGELIST).content.decode()
    row = next(row for row in html.split("<tr") if f"/{gap.pk}/change/" in row)
    assert "javascript:" not in row
    assert gap.nearest_document.title in row  # named, not linked
