"""The two insights beat tasks as management commands, for a site that runs cron instead of Celery beat:
``agent_insights_aggregate`` (the ``insights_daily`` task) and ``agent_update_gaps`` (``update_content_gaps``).

The traffic is recorded by real requests to the converse endpoint on the demo content, written with
``recording.flush()`` as the writer thread would, and moved back in time where a test needs closed days."""

from __future__ import annotations

import datetime
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F, Sum
from django.test import override_settings

from agent_handshake.insights import recording
from agent_handshake.insights.aggregation import site_today
from agent_handshake.insights.gaps import waiting
from agent_handshake.models import AgentRequest, ContentGap, DailyTraffic
from tests.insights.test_gaps import gaps_lock_held_elsewhere

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_buffer")]

RECORDING = {"INSIGHTS_RECORD_QUESTIONS": True}
UNANSWERED = ["Do you sell gift cards?", "Can I buy a gift voucher for a friend?", "Do you have gift certificates?"]


def converse(client, query: str) -> None:
    response = client.post(
        "/agent/converse",
        json.dumps({"ahp": "0.1", "capability": "content_search", "query": query}),
        content_type="application/json",
        REMOTE_ADDR="203.0.113.57",
    )
    assert response.status_code == 200, response.content[:300]


def record(client, questions: list[str]) -> list[AgentRequest]:
    with override_settings(AGENT_HANDSHAKE=RECORDING):
        for question in questions:
            converse(client, question)
    recording.flush()
    return list(AgentRequest.objects.order_by("pk"))


def run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def test_agent_insights_aggregate_aggregates_closed_days_and_purges_old_rows(client, demo_content):
    rows = record(client, ["How should I brew hojicha?", "How do I season a Yixing teapot?", *UNANSWERED])
    assert len(rows) == 5
    today = site_today()
    yesterday, old = today - datetime.timedelta(days=1), today - datetime.timedelta(days=40)
    AgentRequest.objects.filter(pk__in=[row.pk for row in rows[:3]]).update(at=F("at") - datetime.timedelta(days=1))
    AgentRequest.objects.filter(pk=rows[3].pk).update(at=F("at") - datetime.timedelta(days=40))
    # rows[4] stays today: a day still open is not aggregated.

    out = run("agent_insights_aggregate")
    assert f"Aggregated 2 closed days of agent traffic: {old}, {yesterday}." in out
    assert "Purged 1 raw request older than 30 days (INSIGHTS_RETENTION_DAYS); the daily aggregates keep it." in out
    counted = dict(DailyTraffic.objects.values("day").annotate(n=Sum("requests")).values_list("day", "n"))
    assert counted == {yesterday: 3, old: 1}
    assert set(AgentRequest.objects.values_list("pk", flat=True)) == {rows[0].pk, rows[1].pk, rows[2].pk, rows[4].pk}

    # Run again: nothing left to do, and it says so.
    out = run("agent_insights_aggregate")
    assert "No closed day of agent traffic left to aggregate." in out
    assert "Purged 0 raw requests" in out


def test_agent_insights_aggregate_refuses_arguments(db):
    with pytest.raises(CommandError, match="unrecognized arguments: yesterday"):
        call_command("agent_insights_aggregate", "yesterday", stdout=StringIO())


def test_agent_update_gaps_groups_the_recorded_unanswered_questions(client, demo_content):
    record(client, ["How should I brew hojicha?", *UNANSWERED])
    waiting_before = waiting().count()
    assert waiting_before >= len(UNANSWERED)  # the gift questions got no answer, or only weak matches

    out = run("agent_update_gaps")
    assert f"Grouped {waiting_before} questions into content gaps; none waiting." in out
    assert ContentGap.objects.exists()
    assert not waiting().exists()

    out = run("agent_update_gaps")
    assert "No unanswered question waiting to be grouped." in out


def test_agent_update_gaps_runs_as_many_batches_as_asked(client, demo_content):
    record(client, UNANSWERED)
    total = waiting().count()
    assert total >= 3
    with override_settings(AGENT_HANDSHAKE={**RECORDING, "INSIGHTS_GAP_BATCH": 1}):
        out = run("agent_update_gaps")
        assert out == (
            f"Grouped 1 question into content gaps; {total - 1} questions still waiting (INSIGHTS_GAP_BATCH is 1; "
            "run it again, or with --batches).\n"
        )
        out = run("agent_update_gaps", "--batches", "100")
    assert f"Grouped {total - 1} questions into content gaps; none waiting." in out
    assert not waiting().exists()


def test_agent_update_gaps_says_when_questions_are_not_recorded(demo_content):
    out = run("agent_update_gaps")  # the default: INSIGHTS_RECORD_QUESTIONS is off
    assert "INSIGHTS_RECORD_QUESTIONS is off" in out
    assert "No unanswered question waiting to be grouped." in out


def test_agent_update_gaps_while_another_run_holds_the_lock(client, demo_content):
    record(client, UNANSWERED)
    with gaps_lock_held_elsewhere():
        out = run("agent_update_gaps")
    assert "Another run is grouping questions now" in out
    assert not ContentGap.objects.exists()


@pytest.mark.parametrize("value", ["0", "-1", "100001"])
def test_agent_update_gaps_refuses_a_bad_batch_count(db, value):
    with pytest.raises(CommandError, match="--batches must be between 1 and 100000"):
        call_command("agent_update_gaps", "--batches", value, stdout=StringIO())
    assert not ContentGap.objects.exists()


def test_agent_update_gaps_with_the_embedding_server_down_is_a_command_error(client, demo_content, closed_port):
    """Cron mails a failed command's output: it says what failed, and the questions wait for the next run."""
    record(client, UNANSWERED)
    waiting_before = waiting().count()
    embeddings = {
        **RECORDING,
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.OpenAIEmbeddings",
        "EMBEDDING_OPTIONS": {"base_url": f"http://127.0.0.1:{closed_port}/v1", "max_retries": 0, "timeout": 2},
    }
    with override_settings(AGENT_HANDSHAKE=embeddings), pytest.raises(CommandError, match="0 questions grouped"):
        call_command("agent_update_gaps", stdout=StringIO())
    assert waiting().count() == waiting_before
    assert not ContentGap.objects.exists()
