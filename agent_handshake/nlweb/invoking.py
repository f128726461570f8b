"""MODE3 through NLWeb: ``/ask`` with ``query.capability`` (what every result's ``actions[]`` posts), and
``/await`` on the Promise an ``async`` capability returns.

A capability's outcome is an Answer whose one result is a schema.org Action: ``actionStatus``
``CompletedActionStatus``, ``result`` (the capability's output, valid against its ``output_schema``) and the
outcome's plain-language ``description``. Missing input is an Elicitation with one question per field (answer it
with the same ``query.capability`` and ``conversation_id``: the next ``query.text`` fills the fields in). An
accepted ``async`` job is a Promise (HTTP 202) whose ``token`` ``/await`` takes: ``checkin`` answers another
Promise while the job runs and the Answer once it is done, formatted as the ``/await``'s ``prefer`` asks, as an
``/ask``'s would be; ``cancel`` stops it (see
:func:`agent_handshake.concierge.jobs.cancel`). A job started in a conversation (after an Elicitation, or with
its ``conversation_id``) is a turn of it: the Promise names it in ``_meta.session_context``, and so does every
``/await`` answer whose request names it. A job that failed, expired or was cancelled is a Failure
(``JOB_FAILED``, ``EXPIRED``, ``CANCELLED``) with HTTP 200: the ``/await`` request itself succeeded (the traffic
insights record it as an error of the job's capability, as every error in a 200 body is). Only the
API key that started a job may await or cancel it (``async`` capabilities always need credentials, so every
job has one); another key gets 403, as on AHP's status URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response

from ..concierge import calls, errors, jobs, traffic
from ..concierge.conversation import Owner
from ..concierge.invocation import Outcome, authorize
from ..concierge.job_status import JobStatus, in_conversation, owned_job, seconds_left, under_way
from ..frontdoor import client_address
from ..identity.auth import printable_ascii
from ..registry import Capability, capability_registry
from . import render
from .actions import action_type
from .request import Ask, Await, Preferences
from .schema_org import CONTEXT

if TYPE_CHECKING:
    from ..models import Job


def action_item(capability: Capability, outcome: Outcome) -> dict[str, Any]:
    item: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": action_type(capability),
        "name": capability.name,
        "actionStatus": "https://schema.org/CompletedActionStatus",
        "description": outcome.answer,
        "result": outcome.data,
    }
    if outcome.side_effects:
        item["sideEffects"] = outcome.side_effects
    return item


def action_answer(
    capability: Capability, outcome: Outcome, preferences: Preferences, conversation_id: str | None
) -> dict[str, Any]:
    """A capability's outcome as an Answer in the format ``preferences`` ask for (the outcome's answer as the summary
    when they ask for one): a synchronous call's on ``/ask``, a finished job's on ``/await``."""
    summary = outcome.answer if preferences.summarize else None
    return render.answer(
        [action_item(capability, outcome)],
        response_format=preferences.response_format,
        conversation_id=conversation_id,
        summary=summary,
    )


def field_questions(capability: Capability, missing: list[str]) -> list[dict[str, Any]]:
    properties = (capability.input_schema or {}).get("properties", {})
    questions = []
    for name in missing:
        spec = properties.get(name.split(".")[0], {})
        question: dict[str, Any] = {
            "id": name,
            "text": spec.get("description") or spec.get("title") or name.replace("_", " "),
        }
        if "enum" in spec:
            question.update(type="single_select", options=[str(option) for option in spec["enum"]])
        else:
            question["type"] = "text"
        questions.append(question)
    return questions


def what_is_asked(body: dict[str, Any]) -> dict[str, Any]:
    """An ``/ask`` body without ``prefer.streaming``, which says how the answer is delivered (as an ``Accept`` header
    does), not what is asked: a retry that only changes it (a broken stream retried as JSON) is the same request to
    its Idempotency-Key, whose stored answer is streamed or not as the retry asks."""
    prefer = body.get("prefer")
    if not isinstance(prefer, dict):
        return body
    asked = {key: value for key, value in body.items() if key != "prefer"}
    rest = {key: value for key, value in prefer.items() if key != "streaming"}
    return {**asked, "prefer": rest} if rest else asked  # ``{"streaming": true}`` alone asks nothing else


def owner_of(request: Request) -> Owner:
    return Owner.of(request.auth, client_address(request._request))


def invoke_from_ask(view: Any, request: Request, ask: Ask) -> HttpResponseBase:
    offered = [c for c in capability_registry.available() if c.handler is not None and c.action_type]
    capability = next((c for c in offered if c.name == ask.capability), None)
    if capability is None:
        raise errors.UnknownCapability(
            f"The capability {ask.capability!r} is not offered.",
            fields=["query.capability"],
            available_capabilities=[c.name for c in offered],
        )
    authorize(capability, request.auth)
    idempotency_key = request.headers.get("Idempotency-Key")
    if idempotency_key and not printable_ascii(idempotency_key):
        raise errors.InvalidInput("Idempotency-Key must be printable ASCII characters.")
    call = calls.Call(
        capability=capability,
        owner=owner_of(request),
        address=client_address(request._request),
        path=request.path,
        protocol="nlweb",
        query=ask.text,
        input=ask.input,
        input_prefix="query.input.",
        session_id=ask.conversation_id,
        strict_session=False,
        content_type="application/action-result",
        fingerprint_of=what_is_asked(request.data),
    )

    def rendered(result: calls.Result) -> tuple[int, dict[str, Any]]:
        if isinstance(result, calls.Refused):
            return result.error.status, render.failure(result.error)
        if isinstance(result, calls.NeedsInput):
            text = (
                f"{result.question} Answer with the same query.capability and "
                "meta.session_context.conversation_id; your query.text fills the fields in."
            )
            questions = field_questions(capability, result.missing)
            return 200, render.elicitation(text, questions, result.session_id)
        if isinstance(result, calls.Accepted):
            job = result.job
            conversation = job_conversation(job, ask.conversation_id)
            return 202, render.promise(job.pk, job.eta_seconds, "Accepted; await it with this token.", conversation)
        return 200, action_answer(capability, result.outcome, ask, result.session_id)

    status, body = call.respond(rendered, idempotency_key)
    response = Response(body, status=status)
    if call.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    view.counter.usages.extend(call.usages)
    return response


def await_job(view: Any, request: Request, wait: Await) -> HttpResponseBase:
    if request.auth is None:
        raise errors.AuthRequired("A promise can be awaited only with the credentials that started its job.")
    job = owned_job(
        wait.token,
        request.auth,
        errors.NotFound("No job has this promise_token.", fields=["promise_token"]),
        cancel=wait.action == "cancel",
        noted_for_capability=True,  # the request is about the job's capability, refused or answered
    )
    conversation = job_conversation(job, wait.conversation_id)
    return job_response(job, wait, cancelling=wait.action == "cancel", conversation_id=conversation)


FAILURES = {
    JobStatus.FAILED: "JOB_FAILED",
    JobStatus.EXPIRED: "EXPIRED",
    JobStatus.CANCELLED: "CANCELLED",
}


def job_conversation(job: Job, conversation_id: str | None) -> str | None:
    """``conversation_id`` if the job is a turn of that conversation (the call records it there), else None: a
    Promise and the ``/await`` answers name the conversation to continue, never one the client merely sent."""
    return conversation_id if in_conversation(job, conversation_id) else None


def job_response(
    job: Job, preferences: Preferences, *, cancelling: bool = False, conversation_id: str | None = None
) -> Response:
    """The ``/await`` answer for ``job``: a Promise while it runs, its Answer (in the format ``preferences`` ask for)
    once it is done, else a Failure."""
    if under_way(job):
        remaining = seconds_left(job)
        message = (
            "Cancellation requested: the job stops when its capability returns, and its result is discarded."
            if cancelling
            else job.progress or "Running"
        )
        return Response(render.promise(job.pk, remaining, message, conversation_id), status=202)
    outcome = jobs.outcome_of(job)
    if outcome is not None:
        capability = capability_registry.get(job.capability) or Capability(job.capability, "", mode="MODE3")
        return Response(action_answer(capability, outcome, preferences, conversation_id))
    reason, message, details = errors.split_job_error(job.error)
    details.pop("reason", None)
    failure = errors.ConciergeError(
        message or job.progress or f"The job is {job.status}.",
        code=FAILURES.get(job.status, "JOB_FAILED"),
        reason=reason or job.status,
        **details,  # the refusal's details (its fields), as a synchronous Failure has them
    )
    traffic.note_error()  # an error in a 200 body: the request succeeded, the job did not
    return Response(render.failure(failure, conversation_id), status=200)
