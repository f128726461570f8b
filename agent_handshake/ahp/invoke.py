"""MODE3 on ``POST /agent/converse``: input, idempotency, running or accepting, and the job status endpoint.

:class:`ConverseView` has already authenticated the request, checked the capability's scope and negotiated the
content type. Here:

1. the capability's own rate limit (``rate_limit``, else ``ACTION_RATE_LIMIT`` for actions), per API key;
2. with an ``Idempotency-Key`` header (and credentials), the first response to that key is returned again,
   never a second run. The record is inserted in the transaction that does the work, so a concurrent retry
   waits on the unique index and then reads the first response;
3. the input: ``context.input`` validated against ``input_schema`` (400 ``missing_field``/``invalid_request``
   naming the fields), or, with none, fields extracted from the ``query``; what is missing is asked for with
   ``clarification_needed`` in a session, and the agent's ``clarification`` fills it in;
4. ``query``/``action``: the handler runs in a transaction with the output checked against ``output_schema``
   (a mismatch is a logged 500 and the handler's writes are rolled back); ``async``: the callback URL is checked
   (SSRF rules) and the job is accepted (202) for a worker.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from rest_framework.request import Request

from .. import state
from ..concierge import calls, errors, jobs
from ..concierge import limits as ratelimit
from ..concierge.conversation import Owner
from ..concierge.validation import unstorable
from ..frontdoor import described
from ..identity import auth
from ..models import Job
from ..registry import Capability
from .base import AHPView
from .errors import error_response, render_error
from .negotiation import Negotiated
from .openapi import STATUS
from .render import response_meta, response_object, status_body
from .request import ConverseRequest

logger = logging.getLogger(__name__)


class Call:
    """One MODE3 request: a :class:`~agent_handshake.concierge.calls.Call`, rendered as AHP."""

    def __init__(
        self,
        request: HttpRequest,
        converse_request: ConverseRequest,
        capability: Capability,
        credentials: auth.Credentials | None,
        negotiated: Negotiated,
        usages: list[ratelimit.Usage],
        input_prefix: str = "context.input.",
    ) -> None:
        self.request = request
        self.capability = capability
        self.negotiated = negotiated
        self.call = calls.Call(
            capability=capability,
            owner=Owner.of(credentials, ratelimit.client_address(request)),
            request=request,
            protocol="ahp",
            query=converse_request.query,
            input=converse_request.input,
            input_prefix=input_prefix,
            session_id=converse_request.session_id,
            clarification=converse_request.clarification,
            requesting_agent=converse_request.requesting_agent,
            callback_url=converse_request.callback_url,
            callback_field="context.callback_url",
            content_type=negotiated.content_type,
            fallback_from=negotiated.fallback_from,
            fingerprint_of={k: v for k, v in converse_request.raw.items() if k != "auth"},
            usages=usages,
        )

    def respond(self) -> HttpResponse:
        idempotency_key = self.request.headers.get("Idempotency-Key")
        if idempotency_key and not auth.printable_ascii(idempotency_key):
            return error_response(400, "invalid_request", "Idempotency-Key must be printable ASCII characters.")
        try:
            status, body = self.call.respond(self.render, idempotency_key)
        except errors.ConciergeError as exc:
            return render_error(exc)
        response = JsonResponse(body, status=status)
        if self.call.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response

    def render(self, result: calls.Result) -> tuple[int, dict[str, Any]]:
        """A call's result as the AHP status and body (§6.2-§6.4, §10)."""
        if isinstance(result, calls.Refused):
            error = result.error
            return error.status, {"status": "error", "code": error.code, "message": error.message, **error.details}
        if isinstance(result, calls.NeedsInput):
            return 200, {
                "status": "clarification_needed",
                "session_id": result.session_id,
                "clarification": {"question": result.question, "options": None, "free_form": True},
            }
        if isinstance(result, calls.Accepted):
            job = result.job
            body: dict[str, Any] = {
                "status": "accepted",
                "session_id": job.pk,
                "eta_seconds": job.eta_seconds,
                "poll": reverse("agent_handshake:converse_status", args=[job.pk]),
            }
            if job.callback_url:
                body["callback"] = {"method": "POST", "url": job.callback_url}
            return 202, body
        content_type, fallback = self.negotiated.content_type, self.negotiated.fallback_from
        body = {"status": "success"}
        if result.session_id is not None:
            body["session_id"] = result.session_id
        body["response"] = response_object(self.capability, result.outcome, content_type)
        body["meta"] = response_meta(self.capability, content_type, fallback, dict(state.snapshot().site_signals))
        return 200, body


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
        job = Job.objects.filter(pk=session_id).first()
        if job is None:
            raise errors.NotFound("No job has this session_id.", reason="unknown_session")
        if job.api_key_id != request.auth.key.pk:
            raise errors.Forbidden("These credentials did not start this job.")
        if job.status == Job.Status.WAITING and job.expires_at and job.expires_at <= timezone.now():
            jobs.expire(pk=job.pk)  # the others are the recover_jobs task's
            job.refresh_from_db()
        return JsonResponse(status_body(job))
