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

import hashlib
import json
import logging
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from .. import state
from ..concierge import callbacks, jobs
from ..concierge import limits as ratelimit
from ..concierge.conversation import Owner, SessionError, load_session, new_session
from ..concierge.invocation import (
    ActionFailed,
    Deferred,
    Invocation,
    OutputInvalid,
    check_input,
    check_output,
    extract_input,
    field_question,
    response_meta,
    response_object,
)
from ..conf import app_settings
from ..identity import auth
from ..models import ConverseSession, IdempotencyRecord, Job
from ..registry import Capability
from .errors import error_response, method_not_allowed
from .negotiation import Negotiated
from .request import ConverseRequest, unstorable

logger = logging.getLogger(__name__)
MAX_IDEMPOTENCY_KEY = 255


class Rejected(Exception):
    """A response that must not be recorded (the transaction, idempotency record included, is rolled back)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


class Call:
    """One MODE3 request."""

    def __init__(
        self,
        request: HttpRequest,
        body: bytes,
        converse_request: ConverseRequest,
        capability: Capability,
        credentials: auth.Credentials | None,
        negotiated: Negotiated,
        usages: list[ratelimit.Usage],
    ) -> None:
        self.request = request
        self.body = body
        self.data = converse_request
        self.capability = capability
        self.credentials = credentials
        self.key = credentials.key if credentials else None
        self.owner = Owner(self.key, ratelimit.client_address(request))
        self.negotiated = negotiated
        self.usages = usages

    def respond(self) -> HttpResponse:
        limited = self.count()
        if limited is not None:
            return limited
        idempotency_key = self.request.headers.get("Idempotency-Key")
        if idempotency_key is not None and len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
            return error_response(400, "invalid_request", f"Idempotency-Key is over {MAX_IDEMPOTENCY_KEY} characters.")
        if idempotency_key and not auth.printable_ascii(idempotency_key):
            return error_response(400, "invalid_request", "Idempotency-Key must be printable ASCII characters.")
        try:
            with transaction.atomic():
                if idempotency_key and self.key is not None:
                    return self.once(idempotency_key)
                status, body = self.run()
                return JsonResponse(body, status=status)
        except Rejected as rejected:
            return rejected.response

    # --- steps --------------------------------------------------------------------------------------------------

    def count(self) -> HttpResponse | None:
        capability = self.capability
        rate = capability.rate_limit or (
            app_settings.ACTION_RATE_LIMIT if capability.action_type in ("action", "async") else None
        )
        if not rate:
            return None
        who = self.key.key_id if self.key else ratelimit.client_ip(self.request)
        usage = ratelimit.count_request(self.request, f"capability:{capability.name}", who, rate)
        self.usages.append(usage)
        if usage.exceeded:
            return error_response(
                429,
                "rate_limited",
                f"Rate limit of {rate} exceeded for {capability.name!r}.",
                scope=usage.public_scope,
                retry_after=usage.retry_after,
            )
        return None

    def fingerprint(self) -> str:
        raw = {k: v for k, v in self.data.raw.items() if k != "auth"}
        canonical = json.dumps([self.request.path, raw], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def once(self, idempotency_key: str) -> HttpResponse:
        """Run at most once per (API key, Idempotency-Key); a retry gets the first response."""
        fingerprint = self.fingerprint()
        record, created = IdempotencyRecord.objects.get_or_create(
            api_key=self.key, key=idempotency_key, defaults={"request_hash": fingerprint, "status_code": 0, "body": {}}
        )
        if not created:
            if record.request_hash != fingerprint:
                return error_response(
                    422,
                    "invalid_request",
                    "This Idempotency-Key was used for a different request; use a new key for a new request.",
                )
            response = JsonResponse(record.body, status=record.status_code)
            response.headers["Idempotent-Replayed"] = "true"
            return response
        status, body = self.run()
        record.status_code, record.body = status, body
        record.save(update_fields=["status_code", "body"])
        return JsonResponse(body, status=status)

    def run(self) -> tuple[int, dict[str, Any]]:
        first, second = self.resolve_input()
        if isinstance(first, int):  # an error or a clarification question
            return first, second
        data, session = first, second
        if self.capability.action_type == "async":
            return self.accept(data)
        return self.execute(data, session)

    def resolve_input(self) -> tuple[Any, Any]:
        """The validated input and the session it was gathered in, or (status, body) of an error or a
        clarification question."""
        capability, request = self.capability, self.data
        session = None
        gathered: dict[str, Any] = {}
        if request.session_id:
            try:
                session = load_session(request.session_id, self.owner, lock=True)
            except SessionError as exc:
                raise Rejected(error_response(exc.status, "invalid_request", exc.message, reason=exc.reason)) from exc
            pending = session.pending_clarification or {}
            if pending.get("kind") == "input" and session.capability == capability.name:
                gathered = dict(pending.get("input") or {})
        structured = request.input is not None
        if gathered:  # continuing a clarification: the answer fills in what was missing
            answer = request.clarification or request.query
            data = {**gathered, **extract_input(capability, answer), **(request.input or {})}
        elif structured:
            data = dict(request.input or {})
        else:
            data = extract_input(capability, request.query)
        problem = check_input(capability, data)
        if problem is None:
            return data, session
        if problem.invalid:
            prefix = "context.input." if structured else "input."
            fields = sorted(prefix + name for name in problem.invalid)
            detail = "; ".join(f"{name}: {message}" for name, message in sorted(problem.invalid.items())[:5])
            return 400, {
                "status": "error",
                "code": "invalid_request",
                "message": f"Invalid input for {capability.name!r}: {detail}",
                "fields": fields,
            }
        if structured and not gathered:
            return 400, {
                "status": "error",
                "code": "missing_field",
                "message": f"{capability.name!r} needs: {', '.join(problem.missing)}.",
                "fields": [f"context.input.{name}" for name in problem.missing],
            }
        return self.ask(session, data, problem.missing)

    def ask(self, session: ConverseSession | None, data: dict[str, Any], missing: list[str]) -> tuple[int, dict]:
        """Ask for the fields the query did not state (§6.3); the answer comes back as ``clarification``."""
        if session is None:
            session = new_session(self.capability.name, self.data.requesting_agent, self.owner)
        question = field_question(self.capability, missing)
        session.capability = self.capability.name
        session.pending_clarification = {"kind": "input", "input": data, "missing": missing, "question": question}
        session.last_active_at = timezone.now()
        session.save()
        return 200, {
            "status": "clarification_needed",
            "session_id": session.pk,
            "clarification": {"question": question, "options": None, "free_form": True},
        }

    def accept(self, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        callback_url = self.data.callback_url
        if callback_url:
            try:
                callbacks.check_callback_url(callback_url)
            except callbacks.UnsafeCallbackURL as exc:
                return 400, {
                    "status": "error",
                    "code": "invalid_request",
                    "message": f"context.callback_url is refused: {exc}",
                    "fields": ["context.callback_url"],
                }
        job = jobs.accept(
            self.capability,
            input=data,
            query=self.data.query,
            key=self.key,
            requesting_agent=self.data.requesting_agent,
            content_type=self.negotiated.content_type,
            fallback_from=self.negotiated.fallback_from,
            callback_url=callback_url,
        )
        body: dict[str, Any] = {
            "status": "accepted",
            "session_id": job.pk,
            "eta_seconds": job.eta_seconds,
            "poll": reverse("agent_handshake:converse_status", args=[job.pk]),
        }
        if callback_url:
            body["callback"] = {"method": "POST", "url": callback_url}
        return 202, body

    def execute(self, data: dict[str, Any], session: ConverseSession | None) -> tuple[int, dict[str, Any]]:
        capability = self.capability
        invocation = Invocation(capability, data, self.data.query, self.key, self.data.requesting_agent)
        try:
            with transaction.atomic():  # a refused or malformed outcome undoes the handler's writes
                result = capability.handler(invocation)
                if isinstance(result, Deferred):
                    raise OutputInvalid(f"{capability.name} deferred, but only async capabilities may.")
                outcome = check_output(capability, result)
        except ActionFailed as exc:
            return exc.status, {"status": "error", "code": exc.code, "message": exc.message, **exc.extra}
        except OutputInvalid:
            logger.exception("MODE3 capability %s", capability.name)
            raise Rejected(
                error_response(500, "concierge_error", "The capability failed; the error was logged.")
            ) from None
        content_type, fallback = self.negotiated.content_type, self.negotiated.fallback_from
        body: dict[str, Any] = {"status": "success"}
        if session is not None:
            session.pending_clarification = None
            session.turns = [*session.turns, {"query": self.data.query, "answer": outcome.answer[:1000]}]
            session.last_active_at = timezone.now()
            session.save()
            body["session_id"] = session.pk
        body["response"] = response_object(capability, outcome, content_type)
        body["meta"] = response_meta(capability, content_type, fallback, dict(state.snapshot().site_signals))
        return 200, body


@method_decorator(never_cache, name="dispatch")
@method_decorator(csrf_exempt, name="dispatch")  # read-only: a wrong method gets the JSON 405, not the CSRF page
class JobStatusView(View):
    """``GET /agent/converse/status/<session_id>`` (§9.2): readable only with the credentials that started it."""

    http_method_names = ["get", "head", "options"]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.counter = ratelimit.Counter(request)
        try:
            response = super().dispatch(request, *args, **kwargs)
        except Exception:
            logger.exception("The job status endpoint failed on %s", request.path)
            response = error_response(500, "concierge_error", "The concierge failed; the error was logged.")
        return self.counter.headers(response)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return method_not_allowed(request.method or "", ["GET"])

    def get(self, request: HttpRequest, session_id: str) -> HttpResponse:
        from .converse import rate_limited, refused, unauthorized

        try:
            credentials = auth.authenticate(request, b"")
        except auth.AuthError as exc:
            return refused(self.counter, exc)
        if credentials is None:
            ip = self.counter.count_ip()
            if ip.exceeded:
                return rate_limited(ip, "Rate limit exceeded for this IP address.")
            return unauthorized(auth.AuthError("Job status is readable only with the credentials that started it."))
        usage = self.counter.add(ratelimit.count_key(request, credentials.rate_key))
        if usage.exceeded:
            return rate_limited(usage, "Rate limit exceeded for this API key.")
        if unstorable(session_id):
            return error_response(
                400, "invalid_request", "The session_id in the URL contains a NUL character or a surrogate."
            )
        job = Job.objects.filter(pk=session_id).first()
        if job is None:
            return error_response(404, "invalid_request", "No job has this session_id.", reason="unknown_session")
        if job.api_key_id != credentials.key.pk:
            return error_response(403, "forbidden", "These credentials did not start this job.")
        if job.status == Job.Status.WAITING and job.expires_at and job.expires_at <= timezone.now():
            jobs.expire(pk=job.pk)  # the others are the recover_jobs task's
            job.refresh_from_db()
        return JsonResponse(jobs.status_body(job))
