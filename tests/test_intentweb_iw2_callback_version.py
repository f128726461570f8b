"""An ``async`` capability's callback posts the envelope the interaction's next message would get, in the IntentWeb
version the interaction was started in (§3.3: the response's protocol_version is "Same as request"). The interaction
kept no version, so a 1.2 client's callback said 1.0. Real HTTP: the intent through the test client, the callback to
a local receiver, checked against the upstream schema and the site's signature."""

from __future__ import annotations

import json

import pytest

from agent_handshake.concierge.desk import operator_outcome
from agent_handshake.concierge.jobs import complete_waiting, deliver_callback
from agent_handshake.concierge.jobs import run as run_job
from agent_handshake.models import Job
from tests.test_callbacks import Receiver
from tests.test_intentweb import key
from tests.test_intentweb_iw_version import VersionedAgent

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("version", ["1.2", "1.0"])
def test_an_async_intents_callback_speaks_the_interactions_version(client, demo_content, version):
    receiver = Receiver().start()
    try:
        agent = VersionedAgent(client, version, secret=key())
        hook = receiver.url("/intent-hook")
        status, reply = agent.send("intent_request", "Can a person help me with a custom order?", callback_url=hook)
        assert (status, reply["status"], reply["protocol_version"]) == (200, "accepted", version), reply
        job = Job.objects.get(pk=reply["external_id"])
        run_job(job.pk)
        complete_waiting(job.pk, operator_outcome("Yes: write to wholesale@lanternkettle.example.", "Mira"))
        deliver_callback(job.pk)  # what the Celery task does once the job is done
        (request,) = receiver.requests
        posted = json.loads(request["body"])
        agent.check(posted)  # a valid envelope, signed by the site
        assert posted["flow_type"] == "execution_result"
        assert posted["interaction_id"] == agent.interaction_id
        assert posted["protocol_version"] == version
    finally:
        receiver.stop()
