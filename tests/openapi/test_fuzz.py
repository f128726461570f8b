"""schemathesis against a live server, from its own ``/openapi.json``: generated requests to every operation, and
every response checked against the document: no 5xx, a documented status, the documented content type, a body
valid against the documented schema.

Bounded for CI (``AGENT_HANDSHAKE_FUZZ_EXAMPLES`` examples an operation, 8 by default); a longer run is the same
test with a larger number. Requests carry an API key (the capabilities that need one are reached) and the
server's rate limits are lifted (a test of the limits would only ever see 429s)."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from agent_handshake.models import CancelRequest, ConverseSession, IdempotencyRecord, Job
from demo_site.shop.models import Appointment
from tests.nlweb.test_live_servers import committed_key, serve
from tests.testapp.models import Report

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
EXAMPLES = int(os.environ.get("AGENT_HANDSHAKE_FUZZ_EXAMPLES", "8"))
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture(scope="module")
def live(demo_content, django_db_blocker):
    # What the generated requests write is deleted afterwards, so later modules start empty.
    tables = (Appointment, Report, CancelRequest, Job, IdempotencyRecord, ConverseSession)
    with (
        committed_key(django_db_blocker, "Fuzzing agent", *tables) as secret,
        serve("gunicorn (WSGI)", "", AGENT_HANDSHAKE_TEST_NO_LIMITS="1") as url,
    ):
        yield url, secret


@pytest.fixture(scope="module")
def api(live):
    url, _ = live
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_every_operation_answers_as_its_document_says(api, live):
    """Each operation in turn (schemathesis' pytest plugin predates pytest 9's nodes, so the loop is ours)."""
    _, secret = live
    operations, failures, statuses = 0, {}, Counter()
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case):
            response = case.call_and_validate(headers={"Authorization": f"Bearer {secret}"}, checks=CHECKS)
            statuses[response.status_code] += 1

        try:
            run()
        except Exception as exc:  # every operation is tried; the failures are reported together
            failures[operation.label] = exc
    print(
        f"\nschemathesis: {operations} operations, {sum(statuses.values())} requests, "
        f"statuses {dict(sorted(statuses.items()))}"
    )
    assert operations >= 15
    assert not failures, "\n\n".join(f"{label}:\n{exc}" for label, exc in failures.items())
