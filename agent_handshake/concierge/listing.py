"""Questions that ask what the site has, answered with the list of its items rather than with sentences.

"What videos do you have?", "What has been published about video?", "List your blog posts": no sentence on the site
says "we have these fourteen videos", so the nearest sentences answer beside the point, and the reader rightly
finds that none answers. Such a question is answered with the items themselves: the titles of the section's
documents, newest first, each cited, the count said when there are more than are listed.

A question is a listing when it asks what the site has, sells, offers or has published (:data:`LISTING`) and names
one of the site's sections: its heading (``ContentConfig.get_section``) or a model's name, singular or plural.
Words beyond the section ("which *oolong* videos do you have?") narrow the list to the items whose title holds
them; when no title does, the question is not a listing and is answered the usual way. Only the models whose
content may be used in answers are listed (the caller passes them), and only what is indexed: published,
registered content, as everywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import F

from ..indexing import documents_of
from ..models import Document
from ..registry import ContentConfig, content_registry
from .extractive import terms

#: How many items an answer lists; the rest are counted.
LISTED = 10

#: "What/which ... do you have / sell / offer / stock / carry / publish", "what ... have you published / posted",
#: "what has been published about ...", "list / show me (all) your ...".
LISTING = re.compile(
    r"^\s*(?:what|which)\b(?P<kinds>.*?)\b(?:do|does)\s+(?:you|the\s+site|this\s+site|the\s+shop)\s+"
    r"(?:have|sell|offer|stock|carry|publish|make)\b(?P<tail>.*)"
    r"|^\s*(?:what|which)\b(?P<kinds2>.*?)\b(?:have|has)\s+(?:you|been)\s+(?:published|posted|made|written|put\s+out)"
    r"(?:\s+(?:about|on))?(?P<tail2>.*)"
    r"|^\s*(?:list|show\s+me)\b(?P<kinds3>.*)",
    re.IGNORECASE,
)
#: Words of a listing question that say nothing of what is listed.
GENERIC = frozenset(terms("all any kind kinds sort sorts type types new latest recent other item items here available"))


@dataclass(frozen=True)
class Listing:
    """The items a listing question asks for: the section's name, the documents listed and how many there are."""

    section: str
    documents: list[Document]
    total: int


def listing(question: str, labels: list[str]) -> Listing | None:
    """The items ``question`` asks for among the models ``labels``, or None when it is not a listing question (or
    names no section of theirs, or its other words are in no title)."""
    match = LISTING.search(question)
    if match is None:
        return None
    asked = terms(" ".join(part for part in match.groups() if part)) - GENERIC
    configs = [content_registry.get_config_by_label(label) for label in labels]
    for config in configs:
        meta = config.model._meta
        names = terms(f"{config.get_section()} {meta.verbose_name} {meta.verbose_name_plural} {meta.model_name}")
        if names & asked:
            section = [other for other in configs if other.get_section() == config.get_section()]
            return _items(config.get_section(), section, asked - names)
    return None


def _items(section: str, configs: list[ContentConfig], narrowing: set[str]) -> Listing | None:
    documents = documents_of(configs).select_related("content_type")
    documents = documents.order_by(F("published_at").desc(nulls_last=True), "title")
    if narrowing:
        held = [document for document in documents if narrowing <= terms(document.title)]
        return Listing(section, held[:LISTED], len(held)) if held else None
    listed = list(documents[:LISTED])
    return Listing(section, listed, documents.count()) if listed else None
