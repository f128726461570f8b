"""The capability registry as MCP tools, run through the concierge in process (AHP Appendix D.3, D.4).

Every capability the manifest lists is a tool of the same name and description. Every tool takes ``query`` and
``session_id``; a MODE3 tool also takes its ``input_schema``'s properties as arguments (given, they are the
structured input; left out, the fields are read from ``query``, as on AHP). Two tools of our own join them, unless
a capability already has the name: ``ask`` (NLWeb's MCP binding: a question to ``content_search``) and
``job_status`` (an ``async`` capability's job, for clients that only speak MCP).

A result's ``content[0].text`` is the answer; the same data follows as JSON in a second text block (for clients of
any revision) and, from ``2025-06-18``, as ``structuredContent``, declared by ``outputSchema`` where the capability
has an ``output_schema`` (an idempotent retry's stored result too, whichever revision the first call spoke:
:func:`for_revision`). Whatever the concierge refuses (credentials, scope, input, limits) is a tool error
(``isError``) that says what to do, so a model can correct itself; an unknown tool or arguments that are not an
object are JSON-RPC errors. Both answer with HTTP 200, so each is noted for the traffic insights as what it is
(:func:`refusal`; the view notes the JSON-RPC errors).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from rest_framework.request import Request

from ..concierge import calls, errors, jobs, traffic
from ..concierge import limits as ratelimit
from ..concierge.conversation import Owner, Question, Turn, converse
from ..concierge.invocation import authorize
from ..concierge.job_status import owned_job, under_way
from ..concierge.validation import MAX_PROBLEMS, check_query, named, shown
from ..frontdoor import client_address
from ..identity.auth import Credentials
from ..registry import Capability, capability_registry
from .jsonrpc import INVALID_PARAMS, RpcError
from .versions import Revision

ASK = "ask"
JOB_STATUS = "job_status"
#: The arguments every tool takes (Appendix D.3); a capability's own input fields may not shadow them.
COMMON = ("query", "session_id")
QUERY = {"type": "string", "description": "What you want, in natural language."}
SESSION = {"type": "string", "description": "Optional: continue an earlier conversation (its session_id)."}
#: The dialect of the capabilities' schemas (AHP's), which the site checks them and their data with.
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@dataclass
class Exchange:
    """One MCP HTTP request, as the tools see it."""

    request: Request
    revision: Revision
    base: str
    #: Set when a tool needed credentials it did not get (the view then sends ``WWW-Authenticate``).
    challenged: bool = False
    #: Set when an idempotent retry got the stored answer (the view sends ``Idempotent-Replayed``).
    replayed: bool = False
    #: Set when the concierge refused a call as AHP would with a 4xx, which MCP answers with 200 (a tool error): the
    #: view counts the request as declined, so a verified agent's trust goes down for it, not up.
    refused: bool = False
    #: Set when the site could not serve a call (a 5xx on AHP: search down), answered with 200 too: the view moves no
    #: trust for it.
    failed: bool = False
    usages: list[ratelimit.Usage] = field(default_factory=list)
    #: The models (labels; None: the site) whose documents resources/read answered (the view's Content-Signal).
    signal_labels: list[str | None] = field(default_factory=list)
    #: Characters resources/read answered in this HTTP request up to this message (a batch shares one
    #: MCP_MAX_RESOURCE_CHARS: the view starts each message's count from those before it).
    resource_chars: int = 0

    @property
    def credentials(self) -> Credentials | None:
        return self.request.auth

    @property
    def owner(self) -> Owner:
        return Owner.of(self.credentials, client_address(self.request._request))


def offered() -> list[Capability]:
    """The capabilities the manifest lists that can be called."""
    return [capability for capability in capability_registry.available() if capability.handler is not None]


def _input_properties(capability: Capability) -> dict[str, Any]:
    if not capability.action_type or not capability.input_schema:
        return {}
    properties = capability.input_schema.get("properties") or {}
    return {name: spec for name, spec in properties.items() if name not in COMMON}


def _local_definitions(capability: Capability) -> dict[str, Any]:
    """The input schema's own definitions (``$defs``, draft 7's ``definitions``), which the ``$ref`` of its properties
    (``#/$defs/Sku``, as pydantic writes them) point at from the schema's root: the tool's root carries them too."""
    if not capability.action_type or not capability.input_schema:
        return {}
    schema = capability.input_schema
    return {key: schema[key] for key in ("$defs", "definitions") if isinstance(schema.get(key), dict)}


def _output_schema(capability: Capability) -> dict[str, Any] | None:
    """What ``structuredContent`` is, when it is always the capability's output (``query`` and ``action``)."""
    schema = capability.output_schema
    if capability.action_type in ("query", "action") and schema and schema.get("type") == "object":
        return schema
    return None


def _declared(schema: dict[str, Any], revision: Revision, dialect: Any = None) -> dict[str, Any]:
    """``schema`` saying its dialect, from 2025-11-25: a schema without ``$schema`` is 2020-12 there, and ours are
    draft-07 (a draft-07 tuple, ``items`` as an array, is no valid 2020-12 schema). A capability's own is kept."""
    if not revision.at_least("2025-11-25") or "$schema" in schema:
        return schema
    return {"$schema": dialect if isinstance(dialect, str) else DRAFT_07, **schema}


def _tool(
    name: str,
    description: str,
    properties: dict[str, Any],
    revision: Revision,
    *,
    required: list[str] | None,
    dialect: Any = None,
) -> dict[str, Any]:
    schema: dict[str, Any] = _declared({"type": "object", "properties": properties}, revision, dialect)
    if required:
        schema["required"] = required
    tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    if revision.at_least("2025-06-18"):
        tool["title"] = name.replace("_", " ").capitalize()
    return tool


def definitions(revision: Revision) -> list[dict[str, Any]]:
    """``tools/list``: one tool per offered capability, then ``ask`` and ``job_status``."""
    tools = []
    capabilities = offered()
    for capability in capabilities:
        tool = _tool(
            capability.name,
            capability.description,
            {"query": QUERY, "session_id": SESSION, **_input_properties(capability)},
            revision,
            # A question needs its query. An action takes its input as fields, or in words, and asks for what is
            # missing (a missing_field result), so it requires nothing a client must send before it can call.
            required=None if capability.action_type else ["query"],
            dialect=(capability.input_schema or {}).get("$schema") if capability.action_type else None,
        )
        tool["inputSchema"].update(_local_definitions(capability))
        if revision.at_least("2025-03-26"):
            read_only = capability.action_type in (None, "query")
            tool["annotations"] = {"readOnlyHint": read_only, "openWorldHint": False}
        if revision.at_least("2025-06-18") and (schema := _output_schema(capability)):
            tool["outputSchema"] = _declared(schema, revision)
        tools.append(tool)
    names = {capability.name for capability in capabilities}
    if ASK not in names and any(c.name == "content_search" for c in capabilities):
        description = "Ask this site a question in natural language; the answer cites its sources."
        tools.append(_tool(ASK, description, {"query": QUERY, "session_id": SESSION}, revision, required=["query"]))
    if JOB_STATUS not in names and any(c.action_type == "async" for c in capabilities):
        description = (
            "The status of a job an async tool started (its job_id): running, or its result. "
            "Only the credentials that started the job can read it."
        )
        job_id = {"type": "string", "description": "The job_id the async tool returned."}
        tool = _tool(JOB_STATUS, description, {"job_id": job_id}, revision, required=["job_id"])
        tools.append(tool)
    return tools


# --- results --------------------------------------------------------------------------------------------------


def result(text: str, structured: dict[str, Any] | None, revision: Revision, *, is_error: bool = False) -> dict:
    content = [{"type": "text", "text": text}]
    if structured is not None:
        content.append({"type": "text", "text": json.dumps(structured, ensure_ascii=False)})
        if revision.at_least("2025-06-18"):
            return {"content": content, "structuredContent": structured, "isError": is_error}
    return {"content": content, "isError": is_error}


def for_revision(body: dict[str, Any], revision: Revision) -> dict[str, Any]:
    """A stored tool result (an idempotent replay) as ``revision`` has it. :func:`result` gives the structured data as
    JSON in a second text block on every revision, and as ``structuredContent`` too from 2025-06-18, where a tool
    with an ``outputSchema`` MUST give it: a result first rendered for an earlier revision gets it from that block,
    and one rendered for a later revision loses it on an earlier one."""
    if not revision.at_least("2025-06-18"):
        return {key: value for key, value in body.items() if key != "structuredContent"}
    content = body.get("content")
    if "structuredContent" in body or not isinstance(content, list) or len(content) != 2:
        return body  # one block: a tool error or a question for missing input, which have no structured data
    try:
        structured = json.loads(content[1]["text"])
    except (KeyError, TypeError, ValueError):
        return body
    if not isinstance(structured, dict):
        return body
    return {"content": content, "structuredContent": structured, **{k: v for k, v in body.items() if k != "content"}}


def tool_error(exc: errors.ConciergeError, revision: Revision) -> dict[str, Any]:
    message = exc.message
    if isinstance(exc, errors.AuthRequired):
        message += (
            " Send an API key from the site owner as `Authorization: Bearer <key>` or `X-AHP-Key: <key>` on the "
            "HTTP request, or as params._meta.auth."
        )
    details = {key: value for key, value in exc.details.items() if value is not None}
    return {"content": [{"type": "text", "text": message}], "isError": True, "_meta": {"code": exc.code, **details}}


def refusal(exc: errors.ConciergeError, exchange: Exchange) -> dict[str, Any]:
    """What the concierge refused before or outside a call, as a tool error; noted for the traffic insights as the
    status AHP would answer it with says (401 and 403 refused, 429 rate limited, else an error), since this one is
    answered with 200. A call's own refusals are rendered by ``invoke`` and noted by the call."""
    exchange.challenged |= isinstance(exc, errors.AuthRequired)
    exchange.refused |= 400 <= exc.status < 500
    exchange.failed |= exc.status >= 500
    traffic.note_refusal(exc)
    return tool_error(exc, exchange.revision)


# --- calls ----------------------------------------------------------------------------------------------------


def call(params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """``tools/call``."""
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "params.name must be the name of a tool (see tools/list).")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "params.arguments must be an object.")
    capabilities = {capability.name: capability for capability in offered()}
    if name not in capabilities and name in (ASK, JOB_STATUS):
        tools = {tool["name"] for tool in definitions(exchange.revision)}
        if name in tools:
            try:
                return ask(arguments, exchange) if name == ASK else job_status(arguments, exchange)
            except errors.ConciergeError as exc:
                return refusal(exc, exchange)
    capability = capabilities.get(name)
    if capability is None:
        available = [tool["name"] for tool in definitions(exchange.revision)]
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {named(name)}", {"available_tools": available})
    try:
        authorize(capability, exchange.credentials)
        query, session_id = common_arguments(arguments, required=not capability.action_type)
        if capability.action_type:
            return invoke(capability, query, session_id, arguments, exchange)
        return answer(capability, query, session_id, exchange)
    except errors.ConciergeError as exc:
        return refusal(exc, exchange)


def common_arguments(arguments: dict[str, Any], *, required: bool) -> tuple[str, str | None]:
    query, session_id = arguments.get("query", ""), arguments.get("session_id")
    if not isinstance(query, str):
        raise errors.InvalidInput("arguments.query must be a string.", fields=["arguments.query"])
    if session_id is not None and not isinstance(session_id, str):
        raise errors.InvalidInput("arguments.session_id must be a string.", fields=["arguments.session_id"])
    if required or query:
        check_query(query, "arguments.query")
    return query, session_id or None


def render_turn(turn: Turn, revision: Revision) -> dict[str, Any]:
    if turn.clarification is not None:
        clarification = turn.clarification
        options = f" Options: {'; '.join(clarification.options)}." if clarification.options else ""
        text = f"{clarification.question}{options} Answer with the same tool and session_id {turn.session_id!r}."
        structured = {
            "status": "clarification_needed",
            "session_id": turn.session_id,
            "clarification": {"question": clarification.question, "options": clarification.options},
        }
        return result(text, structured, revision)
    reply = turn.reply
    assert reply is not None
    structured = {"status": "success", "session_id": turn.session_id, **reply.response()}
    structured["content_signals"] = reply.content_signals
    return result(reply.answer, structured, revision)


def answer(capability: Capability, query: str, session_id: str | None, exchange: Exchange) -> dict[str, Any]:
    """A MODE1/MODE2 capability: a question to the concierge, as AHP would ask it."""
    question = Question(
        capability=capability,
        text=query,
        session_id=session_id,
        content_type=capability.response_types[0] if capability.response_types else "text/answer",
    )
    return render_turn(converse(question, exchange.owner), exchange.revision)


def ask(arguments: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """``ask``: NLWeb's question over MCP: ``content_search``, where a conversation the agent names may be new."""
    query, session_id = common_arguments(arguments, required=True)
    capability = capability_registry.get("content_search")
    assert capability is not None
    authorize(capability, exchange.credentials)  # a site's own content_search may be members-only (a scope)
    question = Question(capability=capability, text=query, session_id=session_id, strict_session=False)
    return render_turn(converse(question, exchange.owner), exchange.revision)


def invoke(
    capability: Capability, query: str, session_id: str | None, arguments: dict[str, Any], exchange: Exchange
) -> dict[str, Any]:
    """A MODE3 capability: one :class:`~agent_handshake.concierge.calls.Call`, with idempotency and limits."""
    fields = _input_properties(capability)
    unknown = sorted(set(arguments) - set(fields) - set(COMMON))
    if unknown:
        # Named cut, and at most MAX_PROBLEMS of them: the refusal does not grow with what was sent.
        shown_names = [named(name) for name in unknown[:MAX_PROBLEMS]]
        more = f" and {len(unknown) - MAX_PROBLEMS} more" if len(unknown) > MAX_PROBLEMS else ""
        raise errors.InvalidInput(
            f"Unknown arguments for {capability.name!r}: {', '.join(shown_names)}{more}; it takes "
            f"{', '.join([*COMMON, *fields])}.",
            fields=[f"arguments.{name}" for name in shown_names],
        )
    structured = {name: value for name, value in arguments.items() if name in fields}
    request = exchange.request
    revision = exchange.revision
    call_ = calls.Call(
        capability=capability,
        owner=exchange.owner,
        address=client_address(request._request),
        path=request.path,
        protocol="mcp",
        query=query,
        input=structured or None,
        input_prefix="arguments.",
        session_id=session_id,
        fingerprint_of={"name": capability.name, "arguments": arguments},
        usages=exchange.usages,
    )

    def render(outcome: calls.Result) -> calls.Rendered:
        if isinstance(outcome, calls.Refused):
            # The status AHP would answer it with (MCP answers 200): kept with an idempotent call's answer, so a
            # replay is a refusal too.
            return outcome.error.status, tool_error(outcome.error, revision)
        if isinstance(outcome, calls.NeedsInput):
            text = (
                f"{outcome.question} Call {capability.name} again with session_id {outcome.session_id!r} and "
                f"{', '.join(outcome.missing)} as arguments (or stated in query)."
            )
            body = result(text, None, revision, is_error=True)
            body["_meta"] = {"code": "missing_field", "missing": outcome.missing, "session_id": outcome.session_id}
            return 200, body
        if isinstance(outcome, calls.Accepted):
            job = outcome.job
            poll = exchange.base + reverse("agent_handshake:converse_status", args=[job.pk])
            text = (
                f"Accepted: job {job.pk} runs in the background (about {job.eta_seconds} s). Ask the "
                f"{JOB_STATUS} tool with this job_id, or GET {poll} with the same credentials."
            )
            structured = {"status": "accepted", "job_id": str(job.pk), "eta_seconds": job.eta_seconds, "poll": poll}
            return 200, result(text, structured, revision)
        data = outcome.outcome.data
        structured = data if isinstance(data, dict) else {"result": data}
        return 200, result(outcome.outcome.answer or json.dumps(data, ensure_ascii=False), structured, revision)

    idempotency_key = request.headers.get("Idempotency-Key")
    status, body = call_.respond(render, idempotency_key)
    exchange.replayed |= call_.replayed
    if call_.replayed:  # stored as the first call's revision rendered it; a retry may speak another
        body = for_revision(body, revision)
    exchange.refused |= 400 <= status < 500
    exchange.failed |= status >= 500
    return body


def job_status(arguments: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """``job_status``: a job of the caller's, as AHP's status URL shows it."""
    job_id = arguments.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise errors.InvalidInput("arguments.job_id must be the job_id an async tool returned.")
    if exchange.credentials is None:
        raise errors.AuthRequired("A job's status is readable only with the credentials that started it.")
    unknown = errors.NotFound(f"No job has the job_id {shown(job_id)}.")
    if len(job_id) > 64 or not job_id.isascii():  # no job's id: not looked up
        raise unknown
    job = owned_job(job_id, exchange.credentials, unknown)
    structured: dict[str, Any] = {"job_id": str(job.pk), "status": job.status, "capability": job.capability}
    outcome = jobs.outcome_of(job)
    if outcome is not None:
        structured.update(status="success", data=outcome.data)
        return result(outcome.answer or f"Job {job.pk} is done.", structured, exchange.revision)
    if under_way(job):
        structured["progress"] = job.progress
        return result(f"Job {job.pk} is {job.status}: {job.progress or 'running'}.", structured, exchange.revision)
    code, message, details = errors.split_job_error(job.error)
    # A refusal's details (fields...) too, as tool_error gives a synchronous refusal's.
    details = {key: value for key, value in details.items() if value is not None}
    structured["error"] = {"code": code or job.status, "message": message or "", **details}
    message = message or job.progress or "no further detail"
    return result(f"Job {job.pk} ended {job.status}: {message}.", structured, exchange.revision)
