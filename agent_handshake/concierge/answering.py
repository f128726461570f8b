"""Answering: what a MODE2 capability answers, from the site's content.

A capability's handler receives a :class:`ConverseContext` (the standalone query, the negotiated content type,
filters, the token limit) and returns a :class:`Reply` or a :class:`Clarification`. It may instead be a
generator that yields :class:`Ranked` once it knows its sources and returns the reply, so that a streaming front
door sends the sources before the answer is written; the handlers here do, and serve ``site_info``,
``content_search`` and the per-model ``get_<model>`` capabilities through one retrieval path.

An instant answer backend (the extractive one, no model call) writes its answer before the sources are sent, and the
source the answer leads with is listed first (:func:`lead_source_first`): an agent that reads the first source reads
the page the answer's first sentence comes from.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import logging
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from .. import state
from ..conf import app_settings
from ..models import Document
from ..registry import Capability, NotRegistered, content_registry
from ..retrieval.hybrid import DocumentHit, Filters, HybridRetriever
from . import extractive
from .backends import (
    CITATION,
    Evidence,
    ExtractiveAnswerer,
    GeneratedAnswer,
    clean_answer,
    get_answer_backend,
    leaks_instructions,
    passages_of,
)
from .extractive import terms
from .listing import Listing, listing
from .reading import read

logger = logging.getLogger(__name__)

SIGNAL_NAMES = ("ai_train", "ai_input", "search", "attribution_required")
#: How far above the relevance floor a best match is still weak. With all-MiniLM-L6-v2 (floor 0.34) the demo's
#: on-topic questions scored 0.36-0.83 and the one off-topic question over the floor 0.42: under 0.44 is a match
#: to look at (see the README's RELEVANCE_FLOOR).
WEAK_MARGIN = 0.1


@dataclass
class ConverseContext:
    capability: Capability
    query: str  # standalone (follow-ups rewritten)
    original_query: str
    content_type: str
    fallback_from: str | None
    max_tokens: int
    filters: Filters = field(default_factory=Filters)
    #: True when the agent already answered a clarification (no second one is asked).
    clarified: bool = False
    #: False when only the sources are wanted: no answer is returned, and a model is not called (an ``instant``
    #: backend's answer is still written, to list the sources in the same order as when it is wanted).
    write_answer: bool = True
    #: The conversation's recent turns, oldest first, as (question, answer): a model answers follow-ups with them.
    history: tuple[tuple[str, str], ...] = ()


@dataclass
class Reply:
    answer: str
    content_type: str
    sources: list[dict[str, Any]] = field(default_factory=list)
    suggested_queries: list[str] = field(default_factory=list)
    payload: dict[str, Any] | None = None
    tokens_used: int = 0
    content_signals: dict[str, bool] = field(default_factory=dict)
    guardrail: str | None = None
    #: The retrieved documents (``Document`` primary keys) in rank order, as ``sources`` lists them.
    document_ids: list[int] = field(default_factory=list)
    #: Nothing on the site answers the question: retrieval found nothing relevant (the answer says so).
    no_answer: bool = False
    #: Answered, but the best match is weak: under :data:`WEAK_MARGIN` above the relevance floor (or kept below it).
    weak: bool = False

    def response(self) -> dict[str, Any]:
        body: dict[str, Any] = {"content_type": self.content_type, "answer": self.answer}
        if self.payload is not None:
            body["payload"] = self.payload
        body["sources"] = self.sources
        body["follow_up"] = {"suggested_queries": self.suggested_queries}
        return body


@dataclass
class Ranked:
    """The documents an answer will be written from, best first (yielded before the answer is)."""

    document_ids: list[int]


Steps = Generator[Ranked, None, "Reply | Clarification"]


@dataclass
class Clarification:
    question: str
    options: list[str] | None
    free_form: bool = True
    #: option -> registered model labels it narrows the search to (empty: everything).
    scopes: dict[str, list[str]] = field(default_factory=dict)


#: "What is this site about?", "Tell me about this shop", "Who are you?": answered with the site profile.
ABOUT_THE_SITE = re.compile(
    r"^\s*what\s+(?:is|'s)\s+(?:this|the|your)\s+(?:site|website|shop|store|blog)(?:\s+about)?\s*\??\s*$"
    r"|^\s*tell\s+me\s+about\s+(?:this|the|your)\s+(?:site|website|shop|store|business)\b"
    r"|^\s*who\s+are\s+you\s*\??\s*$",
    re.IGNORECASE,
)

QUESTION_WORDS = re.compile(
    r"^\s*(who|what|when|where|why|how|which|is|are|can|do|does|should|tell|show|find|list)\b", re.I
)


def is_bare_topic(query: str) -> bool:
    """ "matcha", "oolong tea": a topic, not a question."""
    return len(terms(query)) <= 2 and "?" not in query and not QUESTION_WORDS.match(query)


def max_answer_tokens(requested: int | None) -> int:
    """The agent's ``max_tokens`` hint, never above the site's hard ceiling."""
    return max(16, min(requested or app_settings.DEFAULT_ANSWER_TOKENS, app_settings.MAX_ANSWER_TOKENS))


def combined_signals(labels: list[str]) -> dict[str, bool]:
    """The content signals that hold for every model in ``labels`` (the strictest of them)."""
    snapshot = state.snapshot()
    if not labels:
        return dict(snapshot.site_signals)
    per_model = [snapshot.signals_for(label) for label in labels]
    return {
        name: (any if name == "attribution_required" else all)(signals[name] for signals in per_model)
        for name in SIGNAL_NAMES
    }


def _iso(moment: datetime.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _relevance(rank: int, hit: DocumentHit, top: float, cited: bool, answered: bool) -> str:
    """``direct`` for a source the answer cites (and the first); one it does not cite is ``background`` beside a
    written answer (no agent should take it for support), else, in a list of results, ``indirect`` when it scores
    close to the best."""
    if rank == 0 or cited:
        return "direct"
    return "indirect" if not answered and hit.score >= 0.6 * top else "background"


def section_of(label: str) -> str:
    """The site section of a registered model's pages ("Videos"); empty for a model no longer registered."""
    try:
        return content_registry.get_config_by_label(label).get_section()
    except NotRegistered:
        return ""


def lead_source_first(hits: list[DocumentHit], generated: GeneratedAnswer) -> tuple[list[DocumentHit], GeneratedAnswer]:
    """``hits`` with the one the answer cites first moved to the front, and the answer's citations renumbered to
    match (the others keep their order). Unchanged when the answer cites no source, or the first already."""
    first = CITATION.search(generated.text)
    lead = int(first.group(1)) if first else 1
    if not 1 < lead <= len(hits):
        return hits, generated
    order = [lead, *(number for number in range(1, len(hits) + 1) if number != lead)]
    renumbered = {old: new for new, old in enumerate(order, start=1)}

    def cite(match: re.Match[str]) -> str:
        return f"[{renumbered.get(int(match.group(1)), int(match.group(1)))}]"

    return [hits[number - 1] for number in order], dataclasses.replace(
        generated,
        text=CITATION.sub(cite, generated.text),
        cited={renumbered.get(number, number) for number in generated.cited},
    )


def best_similarity(hits: list[DocumentHit]) -> float:
    """The best cosine similarity among ``hits`` (-1 without any)."""
    return max((hit.similarity for hit in hits if hit.similarity is not None), default=-1.0)


class ContentConcierge:
    """Answers a capability from the registered content, in the negotiated content type."""

    sources_limit = 5

    def __init__(self, retriever: HybridRetriever | None = None, *, widen: bool = False) -> None:
        self.retriever = retriever or HybridRetriever()
        #: Search all of the site's content too when the capability names its models (not when the request's
        #: filters do), and answer from it when its best passage is clearly closer (by WEAK_MARGIN) than the
        #: models' own (``site_info``: a policy kept outside the pages marked site_info).
        self.widen = widen

    def scope(self, ctx: ConverseContext, *, widened: bool = False) -> Filters | None:
        """The request's filters, narrowed to the models whose content may be used in answers (``ai_input``);
        None when there are none, so nothing is retrieved. ``widened``: not narrowed to the capability's models."""
        requested = list(ctx.filters.models or ([] if widened else ctx.capability.models))
        candidates = requested or [config.label for config in content_registry]
        snapshot = state.snapshot()
        usable = [label for label in candidates if snapshot.signals_for(label)["ai_input"]]
        if not usable:
            return None
        # Unchanged when nothing is excluded: an unrestricted search stays unrestricted (no model filter).
        return dataclasses.replace(ctx.filters, models=requested if usable == candidates else usable)

    def handle(self, ctx: ConverseContext) -> Steps:
        scope = self.scope(ctx)
        if scope is None:
            yield Ranked([])
            reply = self.reply(ctx, [])
            name = state.snapshot().name or "This site"
            reply.answer, reply.guardrail = profile_text(
                f"{name} does not allow its content to be used in answers (content signal ai_input)."
            )
            return reply
        if ctx.content_type == "text/answer" and ctx.write_answer:
            if ABOUT_THE_SITE.search(ctx.query) and state.snapshot().description:
                yield Ranked([])
                return self.about_the_site(ctx)
            labels = scope.models or [config.label for config in content_registry]
            found = listing(ctx.query, labels)
            if found is not None:
                yield Ranked([document.pk for document in found.documents])
                return self.listed(ctx, found)
        hits = self.retriever.search_documents(ctx.query, limit=self.sources_limit, filters=scope)
        if self.widen and ctx.capability.models and not ctx.filters.models:
            wider = self.scope(ctx, widened=True)
            more = (
                []
                if wider is None
                else self.retriever.search_documents(ctx.query, limit=self.sources_limit, filters=wider)
            )
            if best_similarity(more) >= best_similarity(hits) + WEAK_MARGIN:
                hits = more
        if not self.relevant(ctx, hits):
            hits = []
        elif ctx.capability.clarify and not ctx.clarified and not ctx.filters and ctx.content_type == "text/answer":
            clarification = self.clarification(ctx, hits)
            if clarification:
                return clarification
        nearest = self.unanswered(ctx, hits)
        if nearest is not None:
            yield Ranked([nearest.document_id])
            return self.nothing(ctx, nearest)
        if ctx.content_type == "text/answer" and getattr(get_answer_backend(), "instant", False):
            # Written in milliseconds: the answer first, so that the sources are sent in the order the reply lists
            # them, with the one the answer leads with first (a list or a payload keeps the retriever's order). Also
            # when only the sources are wanted: a question gets the same sources whether or not its answer is.
            reply = self.reply(ctx, hits, lead_first=True)
            yield Ranked(list(reply.document_ids))
        else:
            yield Ranked([hit.document_id for hit in hits])
            reply = self.reply(ctx, hits)
        reply.no_answer, reply.weak = not hits, self.weak(hits)
        return reply

    def about_the_site(self, ctx: ConverseContext) -> Reply:
        """ "What is this site about?": the site profile's name and description, nothing else."""
        snapshot = state.snapshot()
        answer, links_removed = profile_text(f"{snapshot.name}: {snapshot.description}".strip(": "))
        return Reply(
            answer=answer,
            content_type=ctx.content_type,
            content_signals=dict(snapshot.site_signals),
            guardrail=links_removed,
        )

    def listed(self, ctx: ConverseContext, found: Listing) -> Reply:
        """A listing question's reply: the items' titles, each cited, and how many more there are (their titles are
        the site's content: cleaned as every answer is)."""
        items = "; ".join(f"“{document.title}” [{number}]" for number, document in enumerate(found.documents, 1))
        more = found.total - len(found.documents)
        answer = f"{found.section} ({found.total}): {items}" + (f"; and {more} more." if more else ".")
        evidence = [Evidence(number, d.title, d.url, "", d.title) for number, d in enumerate(found.documents, 1)]
        answer, links_removed = clean_answer(answer, evidence)
        labels = sorted({f"{d.content_type.app_label}.{d.content_type.model}" for d in found.documents})
        return Reply(
            answer=answer,
            content_type=ctx.content_type,
            sources=[{"title": d.title, "url": d.url, "relevance": "direct"} for d in found.documents],
            content_signals=combined_signals(labels),
            guardrail=links_removed,
            document_ids=[document.pk for document in found.documents],
        )

    def unanswered(self, ctx: ConverseContext, hits: list[DocumentHit]) -> DocumentHit | None:
        """The nearest page, when the reader finds that none of ``hits``' sentences answers the question (its best
        score under ``READER_MIN_SCORE``); None when one does, when there is no reader, or when no answer is to be
        written (a search's results, a list, a payload: the pages are what was asked for)."""
        if not hits or not ctx.write_answer or ctx.content_type != "text/answer":
            return None
        reading = read(ctx.query, passages_of(self.evidence(hits)))
        if reading is None or reading.best >= app_settings.READER_MIN_SCORE:
            return None
        return hits[reading.best_source - 1] if reading.scores else hits[0]

    def nothing(self, ctx: ConverseContext, nearest: DocumentHit) -> Reply:
        """The reply of a question the site does not answer, naming the nearest page as such (a source of the
        ``background`` kind: not support for an answer, somewhere to look)."""
        reply = self.reply(ctx, [])
        title, _ = profile_text(nearest.title)
        reply.answer = f"{reply.answer} The closest page is “{title}”."
        reply.sources = [{"title": nearest.title, "url": nearest.url, "relevance": "background"}]
        reply.document_ids = [nearest.document_id]
        reply.content_signals = combined_signals([nearest.model_label])
        reply.no_answer = True
        return reply

    def evidence(self, hits: list[DocumentHit]) -> list[Evidence]:
        """The passages of ``hits`` as the answer backends read them, numbered by source."""
        sections = {label: section_of(label) for label in {hit.model_label for hit in hits}}
        return [
            Evidence(
                number,
                hit.title,
                hit.url,
                passage.passage.heading,
                passage.passage.text,
                similarity=passage.similarity,
                section=sections[hit.model_label],
            )
            for number, hit in enumerate(hits, start=1)
            for passage in hit.passages[:3]
        ]

    def weak(self, hits: list[DocumentHit]) -> bool:
        """Whether the best of ``hits`` is a weak match (see :data:`WEAK_MARGIN`); False without vector scores."""
        similarities = [hit.similarity for hit in hits if hit.similarity is not None]
        return bool(similarities) and max(similarities) < self.retriever.relevance_floor + WEAK_MARGIN

    def relevant(self, ctx: ConverseContext, hits: list[DocumentHit]) -> bool:
        """Whether the site has anything on the request.

        A question is on the site's topics when its nearest passage is at least ``RELEVANCE_FLOOR`` (or the
        embedding model's measured floor) similar to it: rank fusion cannot tell (the best of unrelated passages is
        still ranked first); the embedding's cosine similarity can. Two things the embedding misses are kept
        below the floor: a passage holding every word of the query (a SKU such as "LK-TEA-0001", a product
        name: to a sentence embedding, a code is noise), and an ``application/feed`` listing ("latest videos"
        asks for items, and is like no passage). Without vector scores (no embeddings yet) the hits are kept."""
        if not hits:
            return False
        similarities = [hit.similarity for hit in hits if hit.similarity is not None]
        if not similarities or max(similarities) >= self.retriever.relevance_floor:
            return True
        if ctx.content_type == "application/feed":
            return True
        matched = [p.passage.pk for hit in hits for p in hit.passages if p.text_rank is not None]
        return self.retriever.holds_every_word(ctx.query, matched)

    def clarification(self, ctx: ConverseContext, hits: list[DocumentHit]) -> Clarification | None:
        """Ask which kind of content is meant when a bare topic's best results are split across kinds.

        The rule: the query is a bare topic (at most two content words, not phrased as a question), the top
        four documents (with any tied with the fourth) come from at least three different registered models, and
        the best document of the second model scores at least 85 % of the best overall (fused scores are close).
        A question, a list (``application/feed``) or a filtered search is answered directly.
        """
        if not is_bare_topic(ctx.query) or len(hits) < 3:
            return None
        labels: list[str] = []
        best: dict[str, float] = {}
        # The top four, and any document tied with the fourth (fused scores tie often; which of two tied
        # documents comes first must not decide whether to ask).
        top = (
            [hit for index, hit in enumerate(hits) if index < 4 or hit.score == hits[3].score]
            if len(hits) > 3
            else hits
        )
        for hit in top:
            if hit.model_label not in best:
                labels.append(hit.model_label)
                best[hit.model_label] = hit.score
        if len(labels) < 3 or best[labels[1]] < 0.85 * best[labels[0]]:
            return None
        sections = {label: content_registry.get_config_by_label(label).get_section() for label in labels}
        options = [section.lower() for section in sections.values()] + ["everything"]
        return Clarification(
            question=f"“{ctx.original_query}” matches several kinds of content. Which do you mean: "
            + ", ".join(sections.values())
            + ", or everything?",
            options=options,
            free_form=True,
            scopes={section.lower(): [label] for label, section in sections.items()} | {"everything": []},
        )

    def reply(self, ctx: ConverseContext, hits: list[DocumentHit], *, lead_first: bool = False) -> Reply:
        """The reply from ``hits``; ``lead_first``: the source the answer leads with listed first
        (:func:`lead_source_first`; the answer is written for that even when ``ctx.write_answer`` is False)."""
        snapshot = state.snapshot()
        evidence = self.evidence(hits)
        if ctx.write_answer or lead_first:
            backend = get_answer_backend()
            # A model is given the sentences the reader found to answer; the extractive answerer reads them itself.
            given = evidence if getattr(backend, "instant", False) else condensed(ctx.query, evidence)
            generated = answer_with(backend, ctx, given, snapshot.name)
        else:
            generated = GeneratedAnswer("", backend="none")
        top = max((hit.score for hit in hits), default=0.0)
        if lead_first:
            hits, generated = lead_source_first(hits, generated)
            if not ctx.write_answer:  # written only to order the sources
                generated = GeneratedAnswer("", backend="none")
        sources = [
            {
                "title": hit.title,
                "url": hit.url,
                "relevance": _relevance(rank, hit, top, rank + 1 in generated.cited, bool(generated.text)),
            }
            for rank, hit in enumerate(hits)
        ]
        payload = self.payload(ctx, hits)
        answer = generated.text
        if ctx.fallback_from and hits:
            answer = self.describe(hits[0], ctx.fallback_from) + " " + answer
        # The whole answer, once, whatever went into it (a title, a custom backend's text): content is untrusted.
        answer, links_removed = clean_answer(answer, evidence)
        return Reply(
            answer=answer,
            content_type=ctx.content_type,
            sources=sources,
            suggested_queries=self.suggestions(ctx, hits),
            payload=payload,
            tokens_used=generated.tokens_used,
            content_signals=combined_signals(sorted({hit.model_label for hit in hits})),
            guardrail=generated.guardrail or links_removed,
            document_ids=[hit.document_id for hit in hits],
        )

    def payload(self, ctx: ConverseContext, hits: list[DocumentHit]) -> dict[str, Any] | None:
        if ctx.content_type == "text/answer" or not hits:
            return {"total": 0, "items": [], "next_cursor": None} if ctx.content_type == "application/feed" else None
        documents = Document.objects.in_bulk([hit.document_id for hit in hits])
        if ctx.content_type == "application/feed":
            items = []
            for hit in hits:
                document = documents[hit.document_id]
                items.append(
                    {
                        "title": document.title,
                        "url": document.url,
                        "description": document.summary,
                        "published_at": _iso(document.published_at),
                        "thumbnail_url": document.payload.get("thumbnail_url"),
                        "metadata": {"content_type": document.ahp_content_type, "schema_type": document.schema_type},
                    }
                )
            return {"total": len(items), "items": items, "next_cursor": None}
        for hit in hits:  # the best document of the negotiated type
            document = documents[hit.document_id]
            if document.ahp_content_type == ctx.content_type:
                payload = dict(document.payload)
                if ctx.content_type.startswith("media/video") or ctx.content_type.startswith("media/audio"):
                    payload.setdefault("title", document.title)
                    payload.setdefault("description", document.summary or None)
                    payload.setdefault("published_at", _iso(document.published_at))
                return payload
        return None

    @staticmethod
    def describe(hit: DocumentHit, content_type: str) -> str:
        kind = content_type.split("/", 1)[1].replace("-", " ")
        return f"The {kind} “{hit.title}” is at {hit.url}."

    @staticmethod
    def suggestions(ctx: ConverseContext, hits: list[DocumentHit]) -> list[str]:
        suggestions = []
        for hit in hits[1:3]:
            suggestions.append(f"Tell me more about “{hit.title}”")
        if hits:
            headings = [p.passage.heading for p in hits[0].passages if p.passage.heading]
            for heading in headings[:1]:
                suggestions.append(f"{heading.split(' > ')[-1]} in “{hits[0].title}”")
        return suggestions


def site_info(ctx: ConverseContext) -> Steps:
    """The site profile, plus what the pages marked ``site_info`` say (or, when they say nothing on the question,
    the rest of the site's content)."""
    reply = yield from ContentConcierge(widen=True).handle(ctx)
    if isinstance(reply, Reply):
        snapshot = state.snapshot()
        intro = f"{snapshot.name}: {snapshot.description}".strip(": ") if snapshot.name else ""
        intro, links_removed = profile_text(intro)
        if intro and reply.no_answer:  # what the site is about, without "nothing answers this" after it
            reply.answer, reply.sources, reply.document_ids = intro, [], []
            reply.guardrail = links_removed
        elif intro and intro not in reply.answer:
            reply.answer = f"{intro}\n\n{reply.answer}"
            reply.guardrail = reply.guardrail or links_removed
    return reply


def profile_text(text: str) -> tuple[str, str | None]:
    """Text from the site profile (its name, its description) as an answer carries it, and whether a link was
    removed: cleaned as content is (:func:`~.backends.clean_answer`), since whoever may edit the profile in the admin
    writes what agents read as the site's word; a link of the text's own to the site is kept, as a source's is."""
    return clean_answer(text, [Evidence(0, "", "", "", text)])


def condensed(question: str, evidence: list[Evidence]) -> list[Evidence]:
    """What a model answers from: of each passage, the sentences the reader scored at least
    :data:`~.extractive.SUPPORT_SCORE`, each with the sentence after it (a lead may depend on it), numbered as their
    sources are. A model given whole passages answers from whatever they hold, the sentences beside the point
    included; these are the ones that answer. The passages whole when there is no reader."""
    reading = read(question, passages_of(evidence))
    if reading is None or not reading.scores:
        return evidence
    kept = []
    for item, passage in zip(evidence, passages_of(evidence), strict=True):
        units = extractive.units_of(passage.text)
        chosen: set[int] = set()
        for index, unit in enumerate(units):
            if reading.scores.get(extractive.key(unit), float("-inf")) >= extractive.SUPPORT_SCORE:
                chosen |= {index, index + 1}
        # A passage with none keeps its opening: every source stays in the prompt, under its number, for a model
        # that cites it, without the sentences beside the point.
        text = " ".join(units[index] for index in sorted(chosen or {0}) if index < len(units))
        kept.append(dataclasses.replace(item, text=text) if text else item)
    return kept


def answer_with(backend: Any, ctx: ConverseContext, evidence: list[Evidence], site_name: str) -> GeneratedAnswer:
    """The backend's answer, with the conversation's recent turns for a backend that takes them (a custom
    backend written before ``history`` existed is called as before).

    Every backend's answer passes here, so the leak of the instructions is looked for here: a site's own backend
    may send our prompt (``build_messages``) to its model, which can be talked into repeating it as ours can. Such
    an answer is replaced by the extractive one."""
    if ctx.history and "history" in inspect.signature(backend.answer).parameters:
        generated = backend.answer(ctx.query, evidence, ctx.max_tokens, site_name, history=ctx.history)
    else:
        generated = backend.answer(ctx.query, evidence, ctx.max_tokens, site_name)
    # The extractive answerer has no instructions to leak (and would only be replaced by itself).
    if isinstance(backend, ExtractiveAnswerer) or not leaks_instructions(generated.text, evidence):
        return generated
    logger.warning("An answer from the %s backend repeated the instructions; it was replaced", backend.name)
    fallback = ExtractiveAnswerer().answer(ctx.query, evidence, ctx.max_tokens, site_name)
    fallback.tokens_used, fallback.guardrail = generated.tokens_used, "output_blocked"
    return fallback


def content_answer(ctx: ConverseContext) -> Steps:
    return (yield from ContentConcierge().handle(ctx))


SCHEMA_ORG = "https://schema.org/"


def organization(snapshot: state.Snapshot) -> dict[str, Any]:
    """The profile's contact details in schema.org's terms: the business (``schema_type``, a schema.org type such as
    Store, or Organization), its ``address``, and a ``contactPoint`` with ``email``, ``telephone``, the contact
    page's ``url`` and the opening hours as ``hoursAvailable`` (one OpeningHoursSpecification per labelled line, the
    hours in words as its ``description``)."""
    kind = snapshot.schema_type.removeprefix(SCHEMA_ORG).removeprefix("http://schema.org/").strip("/")
    data: dict[str, Any] = {"@context": SCHEMA_ORG, "@type": kind if kind.isalnum() else "Organization"}
    if snapshot.name:
        data["name"] = snapshot.name
    if address := snapshot.contact.get("address"):
        data["address"] = address
    point: dict[str, Any] = {"@type": "ContactPoint"}
    for ours, theirs in (("email", "email"), ("phone", "telephone"), ("url", "url")):
        if value := snapshot.contact.get(ours):
            point[theirs] = value
    if snapshot.hours:
        point["hoursAvailable"] = [
            {"@type": "OpeningHoursSpecification", "name": label, "description": text}
            for label, text in snapshot.hours.items()
        ]
    if len(point) > 1:
        data["contactPoint"] = point
    return data


def contact(ctx: ConverseContext) -> Reply:
    """The ``contact`` capability: the profile's contact details, and its opening hours when it has them; as
    application/data, in schema.org's terms (:func:`organization`)."""
    snapshot = state.snapshot()
    lines = [f"{key}: {value}" for key, value in snapshot.contact.items()]
    if snapshot.hours:
        hours = [text if label == "hours" else f"{label} {text}" for label, text in snapshot.hours.items()]
        lines.append("opening hours: " + ", ".join(hours))
    data = organization(snapshot)
    return Reply(
        answer=f"You can reach {snapshot.name or 'the site owner'} by " + "; ".join(lines) + ".",
        content_type=ctx.content_type,
        payload={"schema": SCHEMA_ORG + data["@type"], "data": data}
        if ctx.content_type == "application/data"
        else None,
        content_signals=dict(snapshot.site_signals),
    )
