"""The content registry at start-up and after it: a model is kept in step with its documents whenever it is
registered, and a mistake in a registration is named by ``manage.py check`` instead of stopping the start."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone

import agent_handshake
from agent_handshake.models import Document
from agent_handshake.registry import ContentConfig
from demo_site.shop.models import Order
from tests.testapp.models import Article

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


class OrderContent(ContentConfig):
    title_field = "number"
    body_field = "tracking_code"

    def get_url(self, obj):
        return f"/orders/{obj.number}/"


def has_document(obj) -> bool:
    return Document.objects.filter(content_type=ContentType.objects.get_for_model(obj), object_id=str(obj.pk)).exists()


def new_order(number: str) -> Order:
    return Order.objects.create(
        number=number, customer_email="tea@example.com", placed_at=timezone.now(), tracking_code="Sencha in a box."
    )


def test_a_model_registered_after_start_up_is_indexed_when_saved_and_forgotten_when_deleted(
    registries, django_capture_on_commit_callbacks
):
    """The receivers were connected once, in ``ready()``, for the models registered by then: a model registered
    later (in another app's ``ready()``, or at runtime) was never indexed on save, and its deleted objects stayed
    answerable until ``agent_reindex`` ran."""
    agent_handshake.register(Order, OrderContent)
    with django_capture_on_commit_callbacks(execute=True):
        order = new_order("A-100")
    assert has_document(order)
    with django_capture_on_commit_callbacks(execute=True):
        Order.objects.filter(pk=order.pk).first().delete()
    assert not has_document(order)


def test_a_model_registered_again_is_indexed_once_per_save(registries, django_capture_on_commit_callbacks):
    agent_handshake.register(Order, OrderContent)
    agent_handshake.unregister(Order)
    agent_handshake.register(Order, OrderContent)
    agent_handshake.register(Order, OrderContent)  # a duplicate: E003 names it, the first stays in force
    with django_capture_on_commit_callbacks() as callbacks:
        new_order("A-101")
    assert len(callbacks) == 1


def test_a_model_unregistered_after_start_up_is_no_longer_indexed(registries, publish, caplog):
    """Its receivers stay connected: each save then logged "Could not index" with a NotRegistered traceback."""
    agent_handshake.unregister(Article)
    with caplog.at_level(logging.ERROR, logger="agent_handshake"):
        article = publish(Article, title="Kabusecha", slug="kabusecha", body="Shaded for a week.", published=True)
    assert not has_document(article)
    assert [record.getMessage() for record in caplog.records] == []


def _run(tmp_path: Path, app: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``python *args`` in a project made of the test settings plus the app ``app`` (file name -> source)."""
    (tmp_path / "lateapp").mkdir()
    for name, source in {"__init__.py": "", **app}.items():
        (tmp_path / "lateapp" / name).write_text(textwrap.dedent(source))
    (tmp_path / "late_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\nINSTALLED_APPS = [*INSTALLED_APPS, 'lateapp']  # noqa: F405\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "late_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "AGENT_HANDSHAKE_DB_NAME": connection.settings_dict["NAME"],  # the test database, migrated
    }
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


SAVE_AN_ORDER = """
import json

import django

django.setup()

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.test import TestCase
from django.utils import timezone

from agent_handshake.models import Document
from demo_site.shop.models import Order

with transaction.atomic():
    with TestCase.captureOnCommitCallbacks(execute=True):
        order = Order.objects.create(number="L-1", customer_email="a@example.com", placed_at=timezone.now())
    documents = Document.objects.filter(content_type=ContentType.objects.get_for_model(Order), object_id=order.pk)
    print(json.dumps({"indexed": documents.exists()}))
    transaction.set_rollback(True)
"""


@pytest.mark.slow
def test_a_model_registered_in_a_later_apps_ready_is_indexed_on_save(tmp_path):
    """The case of the first test as a site meets it: an app listed after agent_handshake registers a model in its
    own ``ready()``, which Django runs after agent_handshake's (``apps.ready`` is still False then)."""
    app = {
        "apps.py": """
            from django.apps import AppConfig


            class LateConfig(AppConfig):
                name = "lateapp"

                def ready(self):
                    import agent_handshake
                    from demo_site.shop.models import Order

                    class OrderContent(agent_handshake.ContentConfig):
                        title_field = "number"

                        def get_url(self, obj):
                            return f"/orders/{obj.number}/"

                    agent_handshake.register(Order, OrderContent)
        """
    }
    run = _run(tmp_path, app, "-c", SAVE_AN_ORDER)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {"indexed": True}


def test_a_section_order_that_is_not_a_number_leaves_llms_txt_served(
    client, registries, publish, django_capture_on_commit_callbacks
):
    """Only ``manage.py check`` (E015) named it; a server started without the checks (gunicorn) answered every
    llms.txt request with a 500 (TypeError: '<' between str and int)."""

    class BadlyOrdered(OrderContent):
        order = "1"

    agent_handshake.register(Order, BadlyOrdered)
    publish(Article, title="Kabusecha", slug="kabusecha", body="Shaded for a week.", published=True)
    with django_capture_on_commit_callbacks(execute=True):
        new_order("A-102")
    response = client.get("/llms.txt")
    assert response.status_code == 200
    body = response.content.decode()
    # Sorted as if it had the default order (100): after the articles (1), not before them as "1" might suggest.
    assert 0 < body.index("## Articles") < body.index("## Orders")


@pytest.mark.slow
def test_a_section_order_that_is_not_a_number_is_named_by_check_at_start_up(tmp_path):
    """The registry is sorted at start-up (the built-in capabilities read it), so a registration in an ``agents``
    module with ``order = "1"`` stopped every command with a TypeError before E015 could name it."""
    agents = """
        import agent_handshake
        from demo_site.shop.models import Order


        @agent_handshake.register(Order)
        class OrderContent(agent_handshake.ContentConfig):
            order = "1"

            def get_url(self, obj):
                return f"/orders/{obj.number}/"
    """
    run = _run(tmp_path, {"agents.py": agents}, "-m", "django", "check")
    assert run.returncode == 1
    assert "TypeError" not in run.stderr
    assert "agent_handshake.E015" in run.stderr
    assert "OrderContent.order is '1'" in run.stderr


@pytest.mark.slow
def test_a_capability_of_an_agents_module_named_like_a_built_in_one_is_named_by_check(tmp_path):
    """Registered before the built-in ones, it is kept instead of the app's own: ``check`` says so (W007)."""
    agents = """
        import agent_handshake
        from agent_handshake.concierge import answering

        agent_handshake.register_capability(
            agent_handshake.Capability(
                name="content_search", description="Search the tea notes.", handler=answering.content_answer
            )
        )
    """
    run = _run(tmp_path, {"agents.py": agents}, "-m", "django", "check")
    assert run.returncode == 0, run.stderr
    assert "agent_handshake.W007" in run.stderr
    assert "'content_search'" in run.stderr
