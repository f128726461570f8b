"""AHP bodies of MODE3 results and async jobs (§6.2, §6.4, §9.2, Appendix C), rendered from the concierge's
protocol-neutral outcomes and job records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import state
from ..concierge import errors, jobs
from ..concierge.invocation import Outcome
from ..concierge.job_status import JobStatus, seconds_left
from ..registry import Capability, capability_registry

if TYPE_CHECKING:
    from ..models import Job


def _summary(data: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, (dict, list)):
            return f"{len(value)} item(s)" if isinstance(value, list) else "…"
        return str(value)

    return "; ".join(f"{key.replace('_', ' ')}: {show(value)}" for key, value in list(data.items())[:8]) + "."


def response_object(capability: Capability, outcome: Outcome, content_type: str) -> dict[str, Any]:
    """The ``response`` of a success body, in the negotiated content type (Appendix C)."""
    body: dict[str, Any] = {"content_type": content_type, "answer": outcome.answer or _summary(outcome.data)}
    if content_type == "application/action-result":
        body["payload"] = {
            "action": capability.name,
            "success": True,
            "result": outcome.data,
            "side_effects": outcome.side_effects,
        }
    elif content_type == "application/data":
        schema = (capability.output_schema or {}).get("$id") or f"#/capabilities/{capability.name}/output_schema"
        body["payload"] = {"schema": schema, "data": outcome.data}
    elif content_type != "text/answer":
        body["payload"] = outcome.data
    body["sources"] = []
    body["follow_up"] = {"suggested_queries": []}
    return body


def response_meta(
    capability: Capability, content_type: str, fallback_from: str | None, signals: dict[str, bool]
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "tokens_used": 0,
        "capability_used": capability.name,
        "mode": capability.mode,
        "cached": False,
        "content_type": content_type,
        "content_signals": signals,
    }
    if fallback_from:
        meta["fallback_from"] = fallback_from
    return meta


def status_body(job: Job) -> dict[str, Any]:
    """What ``GET /agent/converse/status/<id>`` answers and the callback carries (§9.2)."""
    body: dict[str, Any] = {"status": job.public_status, "session_id": job.pk}
    outcome = jobs.outcome_of(job)
    if outcome is not None:
        if "legacy_response" in job.result:  # a job finished before outcomes were stored (migration 0007)
            body["response"], body["meta"] = job.result["legacy_response"], job.result["legacy_meta"]
            return body
        capability = capability_registry.get(job.capability) or Capability(
            name=job.capability, description="", mode="MODE3"
        )
        fallback = job.fallback_from or None
        body["response"] = response_object(capability, outcome, job.content_type)
        body["meta"] = response_meta(capability, job.content_type, fallback, dict(state.snapshot().site_signals))
        return body
    if job.status in (JobStatus.FAILED, JobStatus.CANCELLED):  # §9.2 knows no "cancelled": failed, code cancelled
        code, message, details = errors.split_job_error(job.error)
        message = message or "The job failed."
        body["progress"] = message
        body["error"] = {"code": code or "concierge_error", "message": message, **details}
        return body
    body["progress"] = job.progress
    if job.status == JobStatus.EXPIRED:
        return body
    body["eta_seconds"] = seconds_left(job)
    return body
