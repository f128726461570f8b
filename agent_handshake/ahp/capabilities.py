"""``POST /capabilities/<name>`` (AHP Appendix E): one operation per capability, for OpenAPI clients (GPT Actions
and the like).

It is ``POST /agent/converse`` with the capability in the path and a flat body: ``query`` (required),
``session_id``, ``clarification``, AHP's ``context`` object when wanted, and, for a MODE3 capability, its
``input_schema``'s properties at the top level (they become ``context.input``; left out, the fields are read from
the query as on AHP). Without ``context.accept_types`` the capability's own types are preferred in its order, so
a MODE3 answer's ``response.payload`` holds the data its ``output_schema`` describes. The answer is the AHP
response (``AHPResponse`` in ``/openapi.json``), with the same
credentials, scopes, limits, idempotency and errors as ``/agent/converse``: the same view does the work.

An unknown capability is a 404 (the path names nothing); a body key that is neither AHP's nor one of the
capability's input fields is a 400 naming it, so a typo is not silently dropped.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from rest_framework.request import Request

from ..concierge.turns import answering_capabilities
from ..concierge.validation import MAX_PROBLEMS, named
from ..registry import Capability
from .converse import ConverseView
from .openapi import COMMON, CapabilityOperation, input_fields
from .request import ConverseRequest, RequestError, parse_data


class CapabilityView(ConverseView):
    input_prefix = ""
    #: Recorded as OpenAPI operations (the traffic insights), though AHP does the work.
    insights_protocol = "openapi"
    #: Set per operation when ``/openapi.json`` is generated (one operation per capability; see
    #: :mod:`agent_handshake.openapi`); None when serving.
    documented_capability: Capability | None = None
    openapi_inspector = CapabilityOperation

    def post(self, request: Request, **kwargs: Any) -> HttpResponseBase:
        """ConverseView's work, under this view's own OpenAPI description (one operation per capability)."""
        return super().post(request, **kwargs)

    def parse(self, request: Request) -> ConverseRequest:
        name = self.kwargs["name"]
        capability = next((c for c in answering_capabilities() if c.name == name), None)
        if capability is None:
            raise RequestError(
                "unknown_capability",
                f"No capability is named {named(name)!r}.",
                status=404,
                available_capabilities=[c.name for c in answering_capabilities()],
            )
        data = request.data
        fields = input_fields(capability)
        unknown = sorted({named(key) for key in data if key not in COMMON and key not in fields and key != "auth"})
        if unknown:
            accepted = ", ".join([*COMMON, *fields])
            listed = ", ".join(unknown[:MAX_PROBLEMS])  # a refusal does not grow with the keys sent
            more = f" and {len(unknown) - MAX_PROBLEMS} more" if len(unknown) > MAX_PROBLEMS else ""
            raise RequestError(
                "invalid_request",
                f"Unknown field(s) for {name!r}: {listed}{more}; it takes {accepted}.",
                fields=unknown[:MAX_PROBLEMS],
            )
        body: dict[str, Any] = {"capability": name, **{k: data[k] for k in COMMON if k in data}}
        given = {key: data[key] for key in fields if key in data}
        if given:
            context = body.get("context")
            if context is not None and not isinstance(context, dict):
                raise RequestError("invalid_request", "context must be an object.", fields=["context"])
            stated = (context or {}).get("input")
            if stated is not None and not isinstance(stated, dict):
                raise RequestError("invalid_request", "context.input must be an object.", fields=["context.input"])
            body["context"] = {**(context or {}), "input": {**(stated or {}), **given}}
        if "auth" in data:
            body["auth"] = data["auth"]
        context = body.get("context")
        if context is None or (isinstance(context, dict) and "accept_types" not in context):
            # The capability's own order (its richest type first): a MODE3 answer carries its output_schema's data.
            body["context"] = {**(context or {}), "accept_types": list(capability.response_types)}
        try:
            return parse_data(body)
        except RequestError as exc:
            exc.extra["fields"] = [field.removeprefix("context.input.") for field in exc.extra.get("fields", [])]
            raise
