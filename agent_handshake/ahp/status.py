"""``GET /agent/converse/status/<session_id>`` (AHP §9.2): an accepted MODE3 job's status, for the credentials
that started it. (The MODE3 call itself goes through :mod:`.converse` into the concierge's
:mod:`~agent_handshake.concierge.turns`.)"""

from __future__ import annotations

from django.http import HttpResponseBase, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from rest_framework.request import Request

from ..concierge import errors
from ..concierge.job_status import owned_job
from ..concierge.validation import unstorable
from ..frontdoor import described
from .base import AHPView
from .openapi import STATUS
from .render import status_body


@method_decorator(never_cache, name="dispatch")
class JobStatusView(AHPView):
    """``GET /agent/converse/status/<session_id>`` (§9.2): readable only with the credentials that started it."""

    http_method_names = ["get", "head", "options"]
    allowed = ["GET", "HEAD"]  # a 405's Allow lists what the URL serves (RFC 9110 §15.5.6): HEAD is a GET's headers
    earns_trust = False  # a poll: the request that started the job earned what it did

    @described(**STATUS)
    def get(self, request: Request, session_id: str) -> HttpResponseBase:
        if request.auth is None:
            raise errors.AuthRequired("Job status is readable only with the credentials that started it.")
        if unstorable(session_id):
            raise errors.InvalidInput("The session_id in the URL contains a NUL character or a surrogate.")
        unknown = errors.NotFound("No job has this session_id.", reason="unknown_session")
        job = owned_job(session_id, request.auth, unknown)  # expired first if its wait ran out
        return JsonResponse(status_body(job))
