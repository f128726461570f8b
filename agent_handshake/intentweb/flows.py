"""One IntentWeb interaction, turn by turn: the §3.4 rules and §7's incremental resolution over a MODE3 capability.

- The first message of an ``interaction_id`` is an ``intent_request``. Its ``attribution.query_hash`` must be
  the hash of that message (:mod:`.attribution`); every later message repeats it. The intent is routed to a
  capability (:mod:`agent_handshake.concierge.routing`); when two are close, or none fits, the answer is a
  ``clarification_request`` listing them, and the next message chooses. A turn may narrow the capabilities in its
  reach (:meth:`Turn.reachable`: the intent page's, to those its key may use): it chooses, lists and continues only
  among those, and an intent that fits only one out of reach is told so, with those in reach to choose from.
- Then the site collects the capability's ``input_schema`` fields from the messages with the concierge's slot
  filling (:mod:`agent_handshake.concierge.slot_filling`): the intent itself, then each ``information_response``
  (``collected_information`` may carry them by name, as the intent page's forms do; a later value corrects an
  earlier one), answering ``information_request`` with ``required_information`` until the input is complete and
  valid. It then runs the capability through the concierge (the same
  credentials, scopes, limits and idempotency as every front door) and answers ``execution_result`` with
  ``status`` and ``external_id``. A refusal the client can fix (a slot already taken, a date out of range)
  drops the fields it names and asks for them again; any other is a terminal ``error``.
- An ``async`` capability answers ``information_response`` with ``status: accepted`` and the job's id as
  ``external_id``; any later message on the interaction reports the job, ending with ``execution_result`` (or
  ``error``) once it is done; a ``callback_url`` gets that last envelope posted.
- An interaction is continued only with the credentials that started it (anonymous: from its network) and by the
  actor that sent its intent_request (the first ``actor_id`` of the chain; verified then, verified every time);
  anyone else gets ``interaction_in_use`` (an unverified entry of that actor: ``signature_required``).
- ``execution_result`` and ``error`` end the interaction: a later message gets ``interaction_closed``. A client's
  ``error`` closes it. A request refused before it is accepted (a malformed envelope, a replayed nonce,
  credentials, a ``callback_url`` the SSRF check refuses) changes nothing stored: it can be sent again, corrected.

Messages are markdown built from the backend's facts (the capability's own answer and output, its schema's
descriptions); what the client sent is shown only as :func:`cell` makes it (escaped, bounded, its invisible
characters dropped); a refusal of the envelope (:mod:`.envelope`, :mod:`.views`) names the field, not its value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rest_framework.request import Request

from ..concierge import calls, errors, interactions, jobs, routing, slot_filling, traffic
from ..concierge import limits as ratelimit
from ..concierge.conversation import Owner
from ..concierge.interactions import InteractionStatus
from ..concierge.invocation import answer_input
from ..concierge.job_status import find as find_job
from ..concierge.job_status import under_way, up_to_date
from ..frontdoor import client_address
from ..identity.auth import printable_ascii
from ..registry import Capability, capability_registry
from ..text import visible_name
from . import attribution
from .envelope import Envelope

if TYPE_CHECKING:
    from ..models import Interaction, Job


@dataclass
class Reply:
    """What the site answers, before it is signed into an envelope (:func:`.views.signed`)."""

    flow_type: str
    message: str
    status: str | None = None
    http_status: int = 200
    fields: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"flow_type": self.flow_type, "message": self.message}
        if self.status:
            body["status"] = self.status
        return {**body, **self.fields}


def offered() -> list[Capability]:
    """The capabilities an intent can reach: the available MODE3 ones."""
    return [c for c in capability_registry.available() if c.handler is not None and c.action_type]


# --- markdown from untrusted values -----------------------------------------------------------------------------

#: How much of a name the client chose (a field of collected_information) a refusal repeats.
MAX_NAME = 64
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def cell(value: Any, limit: int = 200) -> str:
    """A value for a markdown table cell: one line, bounded, without the characters that do not show (but for the
    joiners a word is written with: :func:`~agent_handshake.text.without_invisible`), markdown escaped."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", visible_name(str(value), limit, ellipsis="…"))


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, ending in "…" if it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(text: str, limit: int = MAX_NAME) -> str:
    """What a client sent (a name, an id), quoted in a sentence that is JSON data, not markdown: bounded, and its
    invisible characters escaped (``repr``)."""
    return repr(cut(text, limit))


def table(rows: dict[str, Any], labels: dict[str, str]) -> str:
    lines = ["| Field | Value |", "|---|---|"]
    lines += [f"| {cell(labels.get(name, name))} | {cell(value)} |" for name, value in rows.items()]
    return "\n".join(lines)


def refusal_notes(filling: slot_filling.Filling) -> list[str]:
    """What the site says of the values :func:`~agent_handshake.concierge.slot_filling.fill` refused (a field's
    value shown with its first refusal only), and of the optional fields among them, which may be left out."""
    notes: list[str] = []
    shown: set[str] = set()
    for refusal in filling.refused:
        value = "" if refusal.field in shown else refusal.value
        shown.add(refusal.field)
        notes.append(f"{cell(value)} is not a valid {cell(refusal.field)}: {cell(refusal.message)}")
    optional = filling.question.optional if filling.question is not None else []
    if optional:
        notes.append(f"{', '.join(cell(name) for name in optional)}: send a valid value, or leave it out to go on "
                     "without it.")  # fmt: skip
    return notes


#: The flow types a client asks the site something with (IntentWeb §3.4: "Either" direction), not answers.
QUESTIONS = ("information_request", "clarification_request")
QUESTION_NOTE = (
    "Your {flow_type} asks a question, which this interaction does not answer: it was not taken as an answer. "
    "Send what is still needed as an information_response."
)


# --- the interaction ----------------------------------------------------------------------------------------------


@dataclass
class Turn:
    """One request's work on its interaction."""

    request: Request
    envelope: Envelope
    endpoint: str
    interaction: Interaction | None = None
    replayed: bool = False
    usages: list[ratelimit.Usage] = field(default_factory=list)
    #: How the turn read what the message said in words (the intent page's "tomorrow"), said with its question.
    readings: list[str] = field(default_factory=list)
    #: The actor_ids whose chain entries were verified with their registered key (:func:`.views.admit`).
    verified: list[str] = field(default_factory=list)
    #: How the capability is called: the intent page's call counts its limit per client address (:mod:`.page`).
    call_class: ClassVar[type[calls.Call]] = calls.Call
    #: The envelope's ``callback_url`` checked before the message's transaction (:meth:`check_callback`).
    callback_check: calls.CallbackCheck | None = field(default=None, init=False, repr=False)
    #: What a clarification says first when the intent fits a capability :meth:`reachable` leaves out.
    not_reachable_lead: ClassVar[str] = "That is not available here."

    def reachable(self) -> list[Capability]:
        """The capabilities this turn's intent may reach: every one :func:`offered` (an agent at ``/intent`` brings
        its own key, and a refusal tells it which scope it lacks); the intent page narrows them to those its key
        may use (:mod:`.page`)."""
        return offered()

    @property
    def owner(self) -> Owner:
        return Owner.of(self.request.auth, self.address)

    def check_callback(self) -> None:
        """Check the envelope's ``callback_url`` (resolving its host) before the message's transaction
        (:meth:`.views.IntentView.process`), as :meth:`calls.Call.respond` does before a call's: DNS takes as long as
        the agent's name server wants, and the interaction's row stays locked for the whole transaction. The
        capability is known only in the transaction, so the check is given to the call (:meth:`call`), which gives
        the refusal where it always did: an async capability's, after the input's."""
        self.callback_check = calls.check_callback(self.envelope.callback_url)

    @property
    def address(self) -> str | None:
        return client_address(self.request._request)

    def run(self, interaction: Interaction | None) -> Reply:
        """The turn on ``interaction`` (None: the interaction_id has none yet), in the caller's transaction
        (:meth:`.views.IntentView.process`), in which the interaction's row was locked (:func:`.views.admit`) and
        stays locked against concurrent turns until it ends (no savepoint of its own: a refusal ends that
        transaction)."""
        if interaction is None:
            return self.start()
        self.interaction = interaction
        return self.go_on(interaction)

    # --- the first message --------------------------------------------------------------------------------------

    def start(self) -> Reply:
        envelope = self.envelope
        if envelope.flow_type != "intent_request":
            raise errors.InvalidInput(
                "No interaction has this interaction_id: the first message of an interaction is an "
                "intent_request (IntentWeb §3.4).",
                code="unknown_interaction",
                fields=["flow_type"],
            )
        if not envelope.message.strip():
            raise errors.InvalidInput("An intent_request says what you want in message.", fields=["message"])
        expected = attribution.query_hash(envelope.body)
        if envelope.attribution["query_hash"] != expected:
            raise errors.InvalidInput(
                "attribution.query_hash is not the hash of this intent_request (see the manifest's "
                f"attribution profile); it is {expected}.",
                code="query_hash_mismatch",
                fields=["attribution.query_hash"],
            )
        key = self.owner.api_key
        actor = self.actor()
        interaction = interactions.new(
            interaction_id=envelope.interaction_id,
            api_key=key,
            client_ip=None if key else self.address,
            actor_id=actor,
            actor_verified=bool(actor) and actor in self.verified,
            protocol_version=envelope.protocol_version,
            query_hash=expected,
            intent=envelope.message,
            endpoint=self.endpoint,
        )
        self.interaction = interaction
        reachable = self.reachable()
        # Routed over every capability, so that an intent that fits one out of reach is told so rather than taken to
        # the nearest of those in reach (a call-back to a price quote); only one in reach is ever chosen or listed.
        route = routing.route(envelope.message, offered())
        if not interactions.create(interaction):  # another request started the same interaction_id first
            raise errors.Conflict(
                "This interaction_id is in use: start your interaction with a new one.",
                code="interaction_in_use",
                status=409,
            )
        in_reach = {capability.name for capability in reachable}
        if route.chosen is None or route.chosen.name not in in_reach:
            candidates = [c for c in route.candidates if c.name in in_reach] if route.chosen is None else []
            # Said only of a clear fit: a message that fits nothing clearly ("Hello") is asked which, not told no.
            out_of_reach = route.chosen is not None
            candidates = candidates or reachable  # none of those it fits is in reach: what is
            interaction.status = InteractionStatus.CLARIFYING
            interaction.candidates = [capability.name for capability in candidates]
            interactions.save_turn(interaction)
            return self.clarification(candidates, first=True, out_of_reach=out_of_reach)
        interaction.capability = route.chosen.name
        interaction.confidence = route.ranked[0].score
        return self.collect(route.chosen, [envelope.message])

    def clarification(self, candidates: list[Capability], *, first: bool, out_of_reach: bool = False) -> Reply:
        """Which of ``candidates`` the client wants; ``out_of_reach``: the intent fitted only capabilities out of
        :meth:`reachable`'s reach, which the question says first (and does not name)."""
        if not candidates:  # a question with no option to choose would be asked again after every answer
            raise errors.UnknownCapability("This site offers nothing to do through intents right now.")
        lines = [f"{number}. **{cell(c.intent_text)}**: {cell(c.description, 300)}"
                 for number, c in enumerate(candidates, start=1)]  # fmt: skip
        lead = "Which of these do you want?" if first else "I could not tell which of these you meant."
        if out_of_reach:
            lead = f"{self.not_reachable_lead} {lead}"
        traffic.note_clarification()
        return Reply(
            "clarification_request",
            lead + "\n\n" + "\n".join(lines) + "\n\nAnswer with its number or its name.",
            fields={
                "required_information": [
                    "Which of these you want: "
                    + "; ".join(f"{number}. {c.intent_text}" for number, c in enumerate(candidates, start=1))
                ],
                "options": [{"name": c.name, "intent": c.intent_text} for c in candidates],
            },
        )

    # --- later messages -----------------------------------------------------------------------------------------

    def go_on(self, interaction: Interaction) -> Reply:
        envelope = self.envelope
        if not self.owner_may_continue(interaction):
            raise errors.Conflict(
                "This interaction_id is in use by another client: start your interaction with a new one.",
                code="interaction_in_use",
                status=409,
            )
        self.check_actor(interaction)
        if interaction.terminal:
            retried = self.retried(interaction)
            if retried is not None:
                return retried
            raise errors.Conflict(
                f"This interaction has ended ({interaction.get_status_display()}): start a new intent with a new "
                "interaction_id (IntentWeb §3.4).",
                code="interaction_closed",
                status=409,
            )
        if envelope.attribution["query_hash"] != interaction.query_hash:
            raise errors.InvalidInput(
                "attribution.query_hash must be the hash of this interaction's intent_request.",
                code="query_hash_mismatch",
                fields=["attribution.query_hash"],
            )
        if envelope.flow_type == "intent_request":
            raise errors.Conflict(
                "This interaction has started: an intent_request comes first and once (IntentWeb §3.4).",
                code="interaction_started",
                status=409,
            )
        if envelope.flow_type == "execution_result":
            raise errors.InvalidInput(
                "execution_result is the site's to send.", code="invalid_flow", fields=["flow_type"]
            )
        interaction.turns += 1
        if envelope.flow_type == "error":
            interaction.status = InteractionStatus.CLOSED
            interactions.save_turn(interaction)
            return Reply("error", "The interaction is closed, as you asked.", status="closed")
        if interaction.status == InteractionStatus.WAITING:
            return self.report(interaction)
        # §3.4: a client's information_request or clarification_request asks the site something ("Do you have
        # vegan options?"); it answers nothing, so its words neither choose an option nor fill a field (read as the
        # answer to a one-field question, "Is there parking?" was the name a tasting was booked under).
        question = envelope.flow_type in QUESTIONS
        if interaction.status == InteractionStatus.CLARIFYING:
            reachable = self.reachable()
            candidates = [c for c in reachable if c.name in interaction.candidates]
            candidates.sort(key=lambda c: interaction.candidates.index(c.name))
            # An answer names an option of the list it was given: once one of those is gone, it may name another.
            changed = len(candidates) != len(interaction.candidates)
            chosen = None if changed or question else routing.choose(envelope.message, candidates)
            if chosen is None:
                listed = reachable
                interaction.candidates = [c.name for c in listed]  # the next answer chooses among these
                interactions.save_turn(interaction)
                return self.clarification(listed, first=False)
            interaction.capability = chosen.name
            interaction.candidates = []
            interaction.confidence = None
            interaction.status = InteractionStatus.COLLECTING
            # Not read from the intent again: it was too vague to route, and a capability's own extractor may
            # take any text for a field ("something from the shop" as a product).
            return self.collect(chosen, [])
        capability = next((c for c in self.reachable() if c.name == interaction.capability), None)
        if capability is None:
            interaction.status = InteractionStatus.FAILED
            interactions.save_turn(interaction)
            return Reply("error", "This capability is no longer offered.", status="unavailable", http_status=410)
        if question:
            return self.collect(capability, [], notes=[QUESTION_NOTE.format(flow_type=envelope.flow_type)])
        return self.collect(capability, [envelope.message], answering=True)

    def retried(self, interaction: Interaction) -> Reply | None:
        """The stored reply to a retry (same Idempotency-Key, same message) of the message that ended the
        interaction: a client that lost the execution_result gets it again, not interaction_closed."""
        capability = capability_registry.get(interaction.capability)
        if capability is None:
            return None
        stored = self.call(capability, {}).stored(self.idempotency_key())
        if stored is None:
            return None
        self.replayed = True  # the view says so (Idempotent-Replayed), as every front door does
        status, body = stored
        fields = {key: value for key, value in body.items() if key not in ("flow_type", "message", "status")}
        return Reply(body["flow_type"], body["message"], body.get("status"), status, fields)

    def idempotency_key(self) -> str | None:
        idempotency_key = self.request.headers.get("Idempotency-Key")
        if idempotency_key and not printable_ascii(idempotency_key):
            raise errors.InvalidInput("Idempotency-Key must be printable ASCII characters.")
        return idempotency_key

    def actor(self) -> str:
        """The actor that sends this message: its chain's first actor_id (§5.2: the agent first, then any gateway
        that carried the message), "" for an empty chain."""
        chain = self.envelope.chain
        return chain[0]["actor_id"] if chain else ""

    def check_actor(self, interaction: Interaction) -> None:
        """An interaction belongs to the actor that sent its intent_request, as it does to the credentials: another
        actor with the same API key (a second agent behind one gateway's key) continues it no more than another
        key does, and an actor verified then is verified in every message (its key deactivated since, it is not).
        Neither refusal names the interaction's actor."""
        if interaction.actor_id is None:  # started before interactions kept their actor: its credentials alone
            return
        actor = self.actor()
        if actor != interaction.actor_id:
            raise errors.Conflict(
                "This interaction was started by another actor (the first actor_id of its attribution chain): only "
                "that actor may continue it. Start your interaction with a new interaction_id.",
                code="interaction_in_use",
                status=409,
                fields=["attribution.chain.0.actor_id"],
            )
        if interaction.actor_verified and actor not in self.verified:
            raise errors.AuthRequired(
                "This interaction was started with a chain entry verified with its actor's registered key, and its "
                "messages must be too: no active key is registered for this actor_id now.",
                code="signature_required",
                fields=["attribution.chain.0.signature"],
            )

    def owner_may_continue(self, interaction: Interaction) -> bool:
        key = self.owner.api_key
        if key is not None or interaction.api_key_id is not None:
            return key is not None and interaction.api_key_id == key.pk
        return ratelimit.network_of(interaction.client_ip) == ratelimit.network_of(self.address)

    # --- collecting the input -----------------------------------------------------------------------------------

    def collect(
        self, capability: Capability, texts: list[str], *, answering: bool = False, notes: list[str] | None = None
    ) -> Reply:
        """``texts`` read for ``capability``'s input (:func:`~agent_handshake.concierge.slot_filling.fill`);
        ``answering``: they answer the site's last question (so a one-field question may be answered by the whole
        message), rather than state the intent; ``notes``: what the site says first if it asks again."""
        interaction = self.interaction
        assert interaction is not None
        self.authorise(capability)
        unknown = slot_filling.unknown_fields(capability, self.envelope.collected)
        if unknown:  # names the client chose, of any length: cut, and escaped in the message
            listed = ", ".join(cell(name, MAX_NAME) for name in unknown[:5])
            if len(unknown) > 5:
                listed += f" and {len(unknown) - 5} more"
            raise errors.InvalidInput(
                f"collected_information names no field of {capability.name!r}: {listed}; its fields are "
                f"{', '.join(slot_filling.properties_of(capability))}.",
                fields=[f"collected_information.{cut(name, MAX_NAME)}" for name in unknown],
            )
        filling = slot_filling.fill(
            capability,
            interaction.collected,
            texts,
            given=self.given(capability),
            # What the site's last question asked for (a row from before it kept that: what is missing).
            asked=list(interaction.asked or []) if answering else None,
            read=self.read,
        )
        interaction.status = InteractionStatus.COLLECTING
        interaction.collected = filling.values
        if filling.question is None:
            return self.execute(capability, filling.values)
        reply = self.ask(capability, filling.question, [*(notes or []), *refusal_notes(filling)])
        interactions.save_turn(interaction)
        return reply

    def read(self, capability: Capability, text: str, asked: list[str]) -> dict[str, Any]:
        """The input fields ``text`` states (the intent, or an answer to the fields ``asked``), as
        :func:`answer_input` reads them (an agent states a date as YYYY-MM-DD, as the manifest asks)."""
        return answer_input(capability, text, asked)

    def given(self, capability: Capability) -> dict[str, Any]:
        """The values the message gives by name (its ``collected_information``), as the input takes them: an agent's
        are structured already; the intent page's form sends text (:mod:`.page`).

        A value of a JSON type its field does not take (a number for a date, null, a list for a time) is a malformed
        message, refused before it changes anything; a value of the right type that the field still refuses (a date
        that does not exist, "25:99") is an answer to correct, asked for again (:meth:`collect`). Taken as such an
        answer, a wrong type dropped the valid value collected before it."""
        given = dict(self.envelope.collected)
        wrong = slot_filling.mistyped(capability, given)
        if wrong:
            said = "; ".join(f"collected_information.{name} must be {' or '.join(kinds)}, not "
                             f"{slot_filling.json_type(given[name])}" for name, kinds in wrong.items())  # fmt: skip
            raise errors.InvalidInput(
                f"{said} (nothing was changed).", fields=[f"collected_information.{name}" for name in wrong]
            )
        return given

    def authorise(self, capability: Capability) -> None:
        """The capability's credentials, on every message (a refusal leaves the interaction as it was)."""
        if not capability.requires_auth:
            return
        credentials = self.request.auth
        if credentials is None:
            raise errors.AuthRequired(
                f"{capability.intent_text} needs an API key: send it as Authorization: Bearer <key> with every "
                "message of this interaction."
            )
        if not credentials.key.allows(capability.scope):
            raise errors.Forbidden(f"This API key lacks the scope {capability.scope!r} that this needs.")

    def ask(self, capability: Capability, question: slot_filling.Question, notes: list[str]) -> Reply:
        """The information_request for ``question``'s fields (required or optional), which the interaction
        remembers (``asked``, saved by the caller): a plain answer to it fills the one field it asked for
        (:meth:`collect`).

        The question is every door's (:func:`~agent_handshake.concierge.invocation.field_question`): what the answer
        gave, and how to label several values. Not escaped as :func:`cell` escapes what a client sent: it is the
        site's own schema, and its example names the fields as an answer must label them (``party_size``, which no
        label reader takes as ``party\\_size``; within a word, CommonMark reads no emphasis in it)."""
        interaction = self.interaction
        assert interaction is not None
        interaction.asked = list(question.fields)
        parts = [" ".join(self.readings)] if self.readings else []
        if notes:
            parts.append("That did not work:\n\n" + "\n".join(f"- {note}" for note in notes))
        traffic.note_clarification(capability.name)
        parts.append(question.text)
        if interaction.collected:
            parts.append("So far I have:\n\n" + table(interaction.collected, slot_filling.labels(capability)))
        return Reply(
            "information_request",
            "\n\n".join(parts),
            fields={
                "required_information": question.described,
                "collected_information": interaction.collected,
                "required_fields": list(question.fields),
                "capability": capability.name,
            },
        )

    # --- running the capability ----------------------------------------------------------------------------------

    def execute(self, capability: Capability, data: dict[str, Any]) -> Reply:
        interaction = self.interaction
        assert interaction is not None
        idempotency_key = self.idempotency_key()
        call = self.call(capability, data)

        def rendered(result: calls.Result) -> calls.Rendered:
            reply = self.outcome(capability, result)
            return reply.http_status, reply.as_dict()

        status, body = call.respond(rendered, idempotency_key)
        self.replayed = call.replayed
        self.usages.extend(call.usages)
        fields = {key: value for key, value in body.items() if key not in ("flow_type", "message", "status")}
        return Reply(body["flow_type"], body["message"], body.get("status"), status, fields)

    def call(self, capability: Capability, data: dict[str, Any]) -> calls.Call:
        interaction = self.interaction
        assert interaction is not None
        chain = self.envelope.chain
        return self.call_class(
            capability=capability,
            owner=self.owner,
            address=self.address,
            path=self.request.path,
            protocol="intentweb",
            query=interaction.intent,
            input=data,
            input_prefix="collected_information.",
            strict_session=False,
            requesting_agent=(chain[0]["actor_id"] if chain else "")[:128],
            callback_url=self.envelope.callback_url,
            content_type="application/action-result",
            savepoint=False,  # in the message's transaction (IntentView.process), which a refusal rolls back
            callback_check=self.callback_check,  # checked before the transaction: no DNS in it
            # A retry is the same message with a new nonce and time: those are left out of the fingerprint.
            fingerprint_of={k: v for k, v in self.envelope.body.items() if k not in ("attribution", "timestamp")},
        )

    def outcome(self, capability: Capability, result: calls.Result) -> Reply:
        interaction = self.interaction
        assert interaction is not None
        if isinstance(result, calls.Done):
            outcome = result.outcome
            interaction.status = InteractionStatus.DONE
            reference = external_id(capability, outcome.data) or ""
            interaction.external_id = interactions.stored_id(reference)
            interactions.save_turn(interaction)
            return done(capability, outcome.answer, outcome.data, interaction, reference)
        if isinstance(result, calls.Accepted):
            job = result.job
            interaction.status = InteractionStatus.WAITING
            interaction.job = job
            interaction.external_id = str(job.pk)
            interactions.save_turn(interaction)
            eta = f" in about {job.eta_seconds} seconds" if job.eta_seconds else ""
            return Reply(
                "information_response",
                f"Accepted: **{cell(capability.intent_text)}** is under way and should be done{eta}. Send any "
                "message on this interaction to hear how it stands; the result also goes to your callback_url "
                "if you gave one.",
                status="accepted",
                fields={"external_id": str(job.pk), "collected_information": interaction.collected},
            )
        if isinstance(result, calls.NeedsInput):  # structured input never asks, but the concierge may
            reply = self.ask(capability, slot_filling.question(capability, result.missing), [])
            interactions.save_turn(interaction)
            return reply
        error = result.error
        named = [str(name) for name in error.details.get("fields") or []]
        if "callback_url" in named:  # the SSRF check's (calls.check_callback), of the envelope's own field
            # Not the capability's input: asked for as if it were missing, it would be asked for after every answer.
            # The message is refused, as AHP refuses the call, and changes nothing: send it again with another URL.
            raise errors.InvalidInput(cell(error.message, 400), fields=["callback_url"])
        fixable = [name.split(".")[-1] for name in named]
        if error.status in (400, 409) and fixable:
            again = slot_filling.ask_again(capability, interaction.collected, fixable)
            interaction.collected = again.values
            assert again.question is not None  # ask_again always asks
            reply = self.ask(capability, again.question, [cell(error.message, 400)])
            reply.status = error.code
            interactions.save_turn(interaction)
            return reply
        interaction.status = InteractionStatus.FAILED
        interactions.save_turn(interaction)
        return Reply("error", cell(error.message, 600), status=error.code, http_status=error.status)

    def report(self, interaction: Interaction) -> Reply:
        """How the interaction's job stands; its end ends the interaction."""
        job = find_job(interaction.job_id)
        job = up_to_date(job) if job is not None else None
        if job is None:  # purged after JOB_RETENTION_SECONDS
            interaction.status = InteractionStatus.FAILED
            interactions.save_turn(interaction)
            return Reply("error", "This interaction's job is no longer kept.", status="expired", http_status=410)
        reply = job_reply(job, interaction)
        interactions.save_turn(interaction)
        if interaction.terminal:
            self.remember(interaction, reply)
        return reply

    def remember(self, interaction: Interaction, reply: Reply) -> None:
        """Store the reply to the poll that ended the interaction under its Idempotency-Key, as a final turn's is
        (:meth:`execute`): the retry of a poll whose answer was lost gets it again (:meth:`retried`), not
        interaction_closed."""
        idempotency_key = self.idempotency_key()
        capability = capability_registry.get(interaction.capability)
        if not idempotency_key or capability is None:
            return
        interactions.remember_answer(self.call(capability, {}), idempotency_key, reply.http_status, reply.as_dict())


def external_id(capability: Capability, data: dict[str, Any]) -> str | None:
    names = [capability.external_id] if capability.external_id else ["reference", "order_number", "id"]
    for name in names:
        value = data.get(name) if isinstance(data, dict) else None
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return None


def done(capability: Capability, answer: str, data: dict[str, Any], interaction: Interaction, reference: str) -> Reply:
    details = {name: value for name, value in data.items() if isinstance(value, (str, int, float))}
    message = cell(answer, 1000) + ("\n\n" + table(details, {}) if details else "")
    fields: dict[str, Any] = {"collected_information": interaction.collected, "result": data}
    if reference:
        fields["external_id"] = reference
    return Reply("execution_result", message, status="confirmed", fields=fields)


def job_reply(job: Job, interaction: Interaction) -> Reply:
    """The reply for an interaction's job as it stands (the interaction's status follows; the caller saves)."""
    capability = capability_registry.get(job.capability) or Capability(job.capability, "", mode="MODE3")
    if under_way(job):
        return Reply(
            "information_response",
            cell(job.progress or "Still under way.", 300),
            status="pending",
            fields={"external_id": str(job.pk)},
        )
    outcome = jobs.outcome_of(job)
    if outcome is not None:
        interaction.status = InteractionStatus.DONE
        reference = external_id(capability, outcome.data) or str(job.pk)
        interaction.external_id = interactions.stored_id(reference)
        reply = done(capability, outcome.answer, outcome.data, interaction, reference)
        reply.status = "completed"
        return reply
    interaction.status = InteractionStatus.FAILED
    code, message, details = errors.split_job_error(job.error)
    message = message or job.progress or f"The job is {job.status}."
    # As a refusal's envelope has it (render_error): its code in status (sold_out, cancelled, concierge_error; an
    # expired job has none), the job's own state beside it.
    fields: dict[str, Any] = {"external_id": str(job.pk), "job_status": str(job.status)}
    named = details.get("fields")
    if isinstance(named, list) and named:  # a refusal's fields, as an error envelope names them (render_error)
        # A capability names its input as "input.<field>"; here that input is the collected_information.
        fields["fields"] = [re.sub(r"^input\.", "collected_information.", str(name)) for name in named]
    return Reply("error", cell(message, 600), status=str(code or job.status), fields=fields)
