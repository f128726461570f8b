"""The schema templates front door (draft-zhou-structured-data-schema-interaction-00) over HTTP.

- ``GET /schema-templates``: the scenarios (one per MODE3 capability that declares its input) with their current
  ``schema_id`` and template URL.
- ``GET /schema-templates/<scenario>?preferred_language=fr``: one template (§4.1).
- ``POST /schema-templates``, the draft's JSON method: ``{"method": "get_schema_template", "params": {"scenario",
  "preferred_language"}}`` answers the template; a structured submission ``{"schema_id", "payload"}`` (with an
  optional ``callback_url`` for an ``async`` scenario) is checked against the template
  (:func:`.templates.check_payload`), then run through the concierge with the same credentials, scopes, rate
  limits and ``Idempotency-Key`` as every front door. The result is the capability's output, shaped by its
  ``output_schema`` (the template's ``response_schema``), with ``schema_update_suggestion`` while keys proposed
  from the ``other`` texts await an editor; an ``async`` scenario answers 202 with the job to poll.

A submission's ``other`` text goes to the concierge's differential semantic pool
(:mod:`agent_handshake.concierge.input_pool`), never to the capability. Errors are ``{"error": {"code",
"message", ...}}`` with a 4xx (the draft defines no error shape); a key at fault is named in ``fields`` as
``payload.<key_name>``. What the client named (a key, a member, a scenario, a method) is quoted cut, and at most
``MAX_PROBLEMS`` unknown names are listed, the rest counted: a refusal never grows with what was sent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.http import HttpResponseBase
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response

from ..concierge import calls, errors, input_pool, jobs
from ..concierge.conversation import Owner
from ..concierge.invocation import authorize
from ..concierge.template_publishing import suggested
from ..concierge.validation import named
from ..frontdoor import FrontDoorView, client_address, described
from ..identity.auth import printable_ascii
from . import openapi, templates

if TYPE_CHECKING:
    from ..models import Job

METHOD = "get_schema_template"
MAX_LANGUAGE_TAG = 35


def error_body(error: errors.ConciergeError) -> dict[str, Any]:
    details = {key: value for key, value in error.details.items() if key != "proposed"}
    if isinstance(details.get("fields"), list):  # a capability's own refusal names its input as "input.<field>"
        details["fields"] = [re.sub(r"^input\.", "payload.", str(name)) for name in details["fields"]]
    return {"error": {"code": error.code, "message": error.message, **details}}


class SchemaTemplatesBase(FrontDoorView):
    def render_error(self, error: errors.ConciergeError) -> HttpResponseBase:
        return Response(error_body(error), status=error.status)


def language_param(value: Any, field_name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_LANGUAGE_TAG:
        raise errors.InvalidInput(
            f"{field_name} must be a language tag (en-US, fr) of at most {MAX_LANGUAGE_TAG} characters.",
            fields=[field_name],
        )
    return value


def template_response(name: str, preferred_language: str | None) -> Response:
    row = templates.current(templates.scenario(name))
    return Response(templates.render(row, preferred_language), headers={"Cache-Control": "no-cache"})


class SchemaTemplateView(SchemaTemplatesBase):
    """``GET /schema-templates/<scenario>``: one template, in the ``preferred_language`` when editors wrote it."""

    http_method_names = ["get", "head", "options"]
    earns_trust = False  # reading a template is discovery, as MCP's tools/list is

    @described(**openapi.GET_TEMPLATE)
    def get(self, request: Request, scenario: str) -> HttpResponseBase:
        return template_response(scenario, language_param(request.query_params.get("preferred_language"),
                                                           "preferred_language"))  # fmt: skip


class SchemaTemplatesView(SchemaTemplatesBase):
    """``GET /schema-templates`` lists the scenarios; ``POST`` takes the draft's method call or a structured
    submission (see the module docstring)."""

    http_method_names = ["get", "head", "post", "options"]

    @described(**openapi.LIST)
    def get(self, request: Request) -> HttpResponseBase:
        self.earns_trust = False  # the listing is discovery; a submission (POST) is work
        scenarios = []
        for capability in templates.offered():
            row = templates.current(capability)
            scenarios.append(
                {
                    "scenario": capability.name,
                    "schema_id": row.schema_id,
                    "description": capability.description,
                    "auth_required": capability.requires_auth,
                    "url": request.build_absolute_uri(
                        reverse("agent_handshake:schema_template", args=[capability.name])
                    ),
                }
            )
        endpoint = request.build_absolute_uri(reverse("agent_handshake:schema_templates"))
        return Response({"endpoint": endpoint, "scenarios": scenarios})

    @described(**openapi.POST)
    def post(self, request: Request) -> HttpResponseBase:
        body = request.data
        if "method" in body:
            return self.method_call(body)
        if "schema_id" in body or "payload" in body:
            return self.submit(request, body)
        raise errors.InvalidInput(
            f'The body is either a method call {{"method": "{METHOD}", "params": {{...}}}} or a structured '
            'submission {"schema_id": ..., "payload": {...}}.',
            fields=["method"],
        )

    def method_call(self, body: dict[str, Any]) -> Response:
        unexpected(body, ("method", "params"), "")
        if body["method"] != METHOD:
            raise errors.InvalidInput(
                f"Unknown method {named(str(body['method']))!r}: this endpoint answers {METHOD!r} (and structured "
                "submissions).",
                code="unknown_method",
                fields=["method"],
            )
        params = body.get("params")
        if not isinstance(params, dict):
            raise errors.InvalidInput("params must be an object with scenario.", fields=["params"])
        unexpected(params, ("scenario", "preferred_language"), "params.")
        name = params.get("scenario")
        if not isinstance(name, str) or not name:
            raise errors.InvalidInput("params.scenario must name a scenario.", fields=["params.scenario"])
        return template_response(name, language_param(params.get("preferred_language"), "params.preferred_language"))

    def submit(self, request: Request, body: dict[str, Any]) -> Response:
        unexpected(body, ("schema_id", "payload", "callback_url"), "")
        capability, row = templates.parse_schema_id(body.get("schema_id"))
        authorize(capability, request.auth)
        # Only null and "" mean no callback: false, 0, [] or {} are a client's mistake, not an absence.
        callback_url = "" if body.get("callback_url") is None else body["callback_url"]
        if not isinstance(callback_url, str):
            raise errors.InvalidInput("callback_url must be a string (a URL).", fields=["callback_url"])
        if callback_url and capability.action_type != "async":
            raise errors.InvalidInput(
                f"callback_url is for async scenarios; {capability.name!r} answers at once.", fields=["callback_url"]
            )
        owner = Owner.of(request.auth, client_address(request._request))
        try:
            payload = templates.check_payload(capability, row, body.get("payload"))
        except errors.InvalidInput as exc:
            if failed := exc.details.get("proposed"):
                input_pool.count_use(capability.name, owner, failed=failed)
            raise
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key and not printable_ascii(idempotency_key):
            raise errors.InvalidInput("Idempotency-Key must be printable ASCII characters.")
        call = calls.Call(
            capability=capability,
            owner=owner,
            address=client_address(request._request),
            path=request.path,
            protocol="schema_templates",
            input=payload.input,
            input_prefix="payload.",
            strict_session=False,
            callback_url=callback_url,
            content_type="application/action-result" if capability.action_type != "query" else "application/data",
            fingerprint_of={key: body.get(key) for key in ("schema_id", "payload", "callback_url")},
        )

        def rendered(result: calls.Result) -> calls.Rendered:
            if isinstance(result, calls.Refused):
                return result.error.status, error_body(result.error)
            # What the work was done with is recorded with it (in its transaction): the other text, the use of
            # proposed keys.
            if payload.other:
                input_pool.record(capability.name, payload.other, owner)
            if payload.proposed:
                input_pool.count_use(capability.name, owner, filled=list(payload.proposed))
            if isinstance(result, calls.NeedsInput):  # structured input is refused when incomplete, never asked
                raise errors.MissingInput(result.question, fields=[f"payload.{name}" for name in result.missing])
            if isinstance(result, calls.Accepted):
                job = result.job
                status, data = (
                    202,
                    {
                        "status": "accepted",
                        "job_id": str(job.pk),
                        "poll": request.build_absolute_uri(reverse("agent_handshake:converse_status", args=[job.pk])),
                        "eta_seconds": job.eta_seconds,
                    },
                )
            else:
                status, data = 200, dict(result.outcome.data)
            if row.proposals_pending and (suggestion := templates.update_suggestion(suggested(capability.name))):
                data["schema_update_suggestion"] = suggestion
            return status, data

        status, data = call.respond(rendered, idempotency_key)
        self.counter.usages.extend(call.usages)
        response = Response(data, status=status)
        if call.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response


def unexpected(body: dict[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
    extra, listed = templates.refused_names(name for name in body if name not in allowed)
    if extra:
        raise errors.InvalidInput(
            f"Unknown member{'s' if len(extra) > 1 else ''}: {listed} (allowed: {', '.join(allowed)}).",
            fields=[f"{prefix}{name}" for name in extra],
        )


def callback_body(job: Job) -> dict[str, Any]:
    """What an ``async`` scenario's callback posts: the job's status and, once it succeeded, the capability's output
    (as a synchronous submission answers it); a failed job's error in this front door's shape."""
    body: dict[str, Any] = {"job_id": str(job.pk), "status": job.public_status}
    outcome = jobs.outcome_of(job)
    if outcome is not None:
        return {**body, "result": outcome.data}
    if job.error:
        code, message, details = errors.split_job_error(job.error)
        refusal = errors.ConciergeError(message or "", code=code or "concierge_error", **details)
        body.update(error_body(refusal))  # its details (fields...) too, as a synchronous refusal's
    return body
