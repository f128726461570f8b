"""NLWeb over real HTTP servers: the event stream under gunicorn (WSGI) and uvicorn (ASGI) through the whole
middleware stack (GZipMiddleware included), read by a real SSE client (httpx + httpx-sse); and ``/await``
against a real Celery worker: check-in, cancelling a queued, a running and a desk job, a second caller refused
(one server and worker serve those cases in turn).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.db import connection
from httpx_sse import connect_sse

from agent_handshake import state
from agent_handshake.models import Job
from tests.concierge.test_jobs import ROOT, Stack, free_port, key_with_secret, wait_for
from tests.fake_openai import FakeOpenAI
from tests.nlweb_schema import assert_valid
from tests.testapp.models import Report

pytestmark = pytest.mark.slow

SERVERS = {
    "gunicorn (WSGI)": [sys.executable, "-m", "gunicorn", "demo_site.wsgi:application", "--workers", "1",
                        "--threads", "4", "--log-level", "warning", "--bind"],
    "uvicorn (ASGI)": [sys.executable, "-m", "uvicorn", "demo_site.asgi:application", "--log-level", "warning",
                       "--host", "127.0.0.1", "--port"],
}  # fmt: skip
MODEL_SECONDS = 2.0


@contextlib.contextmanager
def serve(kind: str, model_url: str, logged: str = "", **env_extra: str):
    """Run ``kind`` on a free port with the test settings; no traceback may reach its stderr, unless the test expects
    the server to log ``logged`` (with its traceback)."""
    port = free_port()
    address = f"127.0.0.1:{port}" if kind.startswith("gunicorn") else str(port)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],
        "AGENT_HANDSHAKE_TEST_ANSWER_URL": model_url,
        **env_extra,
    }
    server = subprocess.Popen(
        [*SERVERS[kind], address], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{kind} did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=20)
        if logged:
            assert logged in errors, errors
        else:
            assert "Traceback" not in errors, errors


@contextlib.contextmanager
def committed_key(blocker, name: str, *tables):
    """An API key a server process can see (written outside the test's transaction), deleted afterwards with the
    rows of ``tables`` (models) the server wrote."""
    from agent_handshake.models import AgentClient, ApiKey

    with blocker.unblock():
        agent, _ = AgentClient.objects.get_or_create(name=name)
        _, secret = ApiKey.objects.issue(agent, scopes=["*"])
    try:
        yield secret
    finally:
        with blocker.unblock():
            for model in tables:
                model.objects.all().delete()
            agent.delete()


#: The demo blog's posts the event stream's question is asked of: the one that answers it, and three others on
#: brewing for it to be found among.
BREWING_POSTS = ["hojicha-roasted-green-tea", "gongfu-vs-western-brewing", "cold-brew-iced-tea",
                 "asamushi-vs-fukamushi-sencha"]  # fmt: skip


@pytest.fixture(scope="module")
def brewing_posts(django_db_setup, django_db_blocker):
    """A few of the demo blog's posts, saved and indexed once for the module, written outside the per-test
    transactions (the servers are other processes) and deleted afterwards; the event stream needs no more than
    this of the demo content (``demo_content`` loads and indexes all of it)."""
    from django.core import serializers

    from agent_handshake.models import Document, LexemeStat
    from demo_site.blog.models import Author, Post

    fixture = (ROOT / "demo_site" / "blog" / "fixtures" / "demo.json").read_text()
    objects = [item.object for item in serializers.deserialize("json", fixture)]
    posts = [post for post in objects if isinstance(post, Post) and post.slug in BREWING_POSTS]
    authors = [author for author in objects if isinstance(author, Author) and author.pk in {p.author_id for p in posts}]
    assert len(posts) == len(BREWING_POSTS)
    with django_db_blocker.unblock():
        for item in [*authors, *posts]:
            item.save()  # an ordinary save: indexed on commit, as an editor's would be
        assert Document.objects.filter(path="/blog/hojicha-roasted-green-tea/").exists()
    state.invalidate()
    yield
    with django_db_blocker.unblock():
        # Deleting the documents cascades to their passages; their words' passage counts go too.
        for model in (Document, LexemeStat, Post, Author):
            model.objects.all().delete()
    state.invalidate()


@pytest.mark.django_db
@pytest.mark.parametrize("kind", SERVERS)
def test_the_event_stream_reaches_the_client_event_by_event(brewing_posts, kind):
    """The sources are sent before the answer is written: with a model that takes two seconds to answer, the
    result events arrive that long before the summary, compressed by us and still flushed event by event."""
    model = FakeOpenAI().start()

    def slow(request):
        time.sleep(MODEL_SECONDS)
        return "Roast it lightly and brew it hot [1]."

    model.reply = slow
    body = {"query": {"text": "How should I brew hojicha?"}, "prefer": {"mode": "summarize", "streaming": True}}
    try:
        with serve(kind, model.base_url) as url, httpx.Client(timeout=30) as client:
            seen: list[tuple[str, float, dict]] = []
            began = time.monotonic()
            with connect_sse(client, "POST", url + "/ask", json=body, headers={"Accept-Encoding": "gzip"}) as source:
                response = source.response
                assert response.status_code == 200
                assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
                assert response.headers["content-encoding"] == "gzip"
                assert response.headers["x-ratelimit-limit"]
                for sse in source.iter_sse():
                    seen.append((sse.event, time.monotonic() - began, sse.json()))
    finally:
        model.stop()
    names = [name for name, _, _ in seen]
    assert names[0] == "start"
    assert names[-3:] == ["content", "complete", "end"], names
    results = [data["item"] for name, _, data in seen if name == "result"]
    assert results
    assert "hojicha" in results[0]["name"].lower()
    first_result = next(at for name, at, _ in seen if name == "result")
    content_at = next(at for name, at, _ in seen if name == "content")
    assert content_at - first_result > MODEL_SECONDS * 0.75, seen  # not buffered until the end
    complete = dict((name, data) for name, _, data in seen)["complete"]
    assert complete["_meta"]["summary"] == "Roast it lightly and brew it hot [1]."
    assert_valid({"_meta": complete["_meta"], "results": results})
    assert complete["_meta"]["total_items"] == len(results)


def start(stack: Stack, secret: str, text: str, capability: str, **input):
    status, body = stack.request(
        "POST",
        "/ask",
        {"query": {"text": text, "capability": capability, "input": input or None}},
        {"Authorization": f"Bearer {secret}"},
    )
    assert status == 202, body
    assert_valid(body)
    assert body["_meta"]["response_type"] == "promise"
    return body["promise"]["token"]


def await_(stack: Stack, secret: str, token: str, action: str = "checkin"):
    status, body = stack.request(
        "POST", "/await", {"promise_token": token, "action": action, "meta": {"api_version": "0.54"}},
        {"Authorization": f"Bearer {secret}"},
    )  # fmt: skip
    assert_valid(body)
    return status, body


def checks_in_until_the_answer_and_only_for_its_caller(stack: Stack) -> None:
    _, secret = key_with_secret()
    _, stranger = key_with_secret("Another agent")
    token = start(stack, secret, "Report on oolong", "compile_report", topic="oolong tea", seconds=1.5)
    statuses = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, body = await_(stack, secret, token)
        statuses.append(body["_meta"]["response_type"])
        if status == 200:
            break
        assert status == 202
        assert body["promise"]["token"] == token
        time.sleep(0.2)
    assert "promise" in statuses
    assert body["_meta"]["response_type"] == "answer"
    result = body["results"][0]
    assert result["actionStatus"] == "https://schema.org/CompletedActionStatus"
    assert result["result"]["words"] == 2
    assert result["result"]["worker_pid"] == stack.worker.pid
    # Another key may neither read nor cancel it.
    for action in ("checkin", "cancel"):
        status, refused = await_(stack, stranger, token, action)
        assert status == 403
        assert refused["error"]["code"] == "FORBIDDEN"
    assert Job.objects.get(pk=token).status == "success"


def cancelling_a_queued_job(stack: Stack, secret: str, token: str) -> None:
    assert Job.objects.get(pk=token).status == "queued"  # the solo worker is inside the running job
    status, body = await_(stack, secret, token, "cancel")
    assert status == 200
    assert body["error"]["code"] == "CANCELLED"


def the_cancelled_queued_job_never_ran(stack: Stack, secret: str, token: str) -> None:
    assert not Report.objects.filter(job_id=token).exists()
    assert Job.objects.get(pk=token).status == "cancelled"
    assert Job.objects.get(pk=token).attempts == 0
    # Any front door renders the finished job: AHP's status URL reports it as failed, code cancelled (§9.2).
    status, polled = stack.request(
        "GET", f"/agent/converse/status/{token}", headers={"Authorization": f"Bearer {secret}"}
    )
    assert status == 200
    assert polled["status"] == "failed"
    assert polled["error"]["code"] == "cancelled"
    assert "eta_seconds" not in polled


def cancelling_a_running_job(stack: Stack, secret: str, token: str) -> None:
    status, body = await_(stack, secret, token, "cancel")
    assert status == 202  # the worker holds the job: it is told, and stops when the capability returns
    assert "Cancellation requested" in body["promise"]["message"]
    final = wait_for(
        lambda: (lambda r: r if r[0] == 200 else None)(await_(stack, secret, token)), message="the cancellation"
    )
    assert final[1]["error"]["code"] == "CANCELLED"
    assert Job.objects.get(pk=token).status == "cancelled"
    assert not Report.objects.filter(job_id=token).exists()  # created by the handler, rolled back


def cancelling_a_desk_request(stack: Stack, secret: str, token: str, admin_client) -> None:
    wait_for(lambda: Job.objects.filter(pk=token, status="waiting").exists(), message="the desk")
    status, body = await_(stack, secret, token, "cancel")
    assert status == 200
    assert body["error"]["code"] == "CANCELLED"
    page = f"/admin/agent_handshake/deskrequest/{quote(token)}/change/"
    admin_client.post(page, {"operator_answer": "Yes, our Lapsang blend."})
    job = Job.objects.get(pk=token)
    assert job.status == "cancelled"
    assert job.operator_answer == ""
    assert "cancelled" in admin_client.get(page).content.decode()


@pytest.mark.django_db(transaction=True)
def test_await_on_a_real_worker(tmp_path, admin_client, subtests):
    """One server and one solo worker (one job at a time) serve every case. The queued job is queued behind the
    running one, which holds the worker while both are cancelled; the desk request, queued after them, reaches
    the worker only once it has been handed the cancelled queued job's message, which must find nothing to run."""
    with Stack("filesystem://", tmp_path) as stack:
        with subtests.test("check-in until the answer, only for its caller"):
            checks_in_until_the_answer_and_only_for_its_caller(stack)

        _, secret = key_with_secret("Cancelling agent")
        running = start(stack, secret, "Report", "compile_report", topic="rolled back", seconds=4)
        wait_for(lambda: Job.objects.filter(pk=running, status="running").exists(), message="the job to start")
        queued = start(stack, secret, "Report", "compile_report", topic="never written")
        with subtests.test("cancelling a queued job"):
            cancelling_a_queued_job(stack, secret, queued)
        with subtests.test("cancelling a running job"):
            cancelling_a_running_job(stack, secret, running)

        desk = start(stack, secret, "Can you blend 2 kg of a smoky tea for a café?", "escalate_to_human")
        with subtests.test("cancelling a desk request"):
            cancelling_a_desk_request(stack, secret, desk, admin_client)
        with subtests.test("a cancelled queued job never runs"):
            wait_for(lambda: Job.objects.get(pk=desk).status != "queued", message="the worker to pass the queued job")
            the_cancelled_queued_job_never_ran(stack, secret, queued)
