"""The site's agent documents as the front doors show them: read from the index, never fetched.

A front door that lists or shows the site's content (NLWeb's results and their actions, MCP's resources) reads the
documents here: by id in a ranking's order, page by page, or by the URL an agent was given; the objects they were
made from; and their markdown (``llms.txt``, ``llms-full.txt`` and one page per object, as the site serves them).
Only the registered models' documents are listed or found by URL (an unregistered model's wait for
``agent_reindex`` to remove them); :func:`in_order` reads the documents a ranking already chose, whatever they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from django.contrib.contenttypes.models import ContentType

from .. import state
from ..indexing import documents_of, utc_day
from ..llms_txt import absolute_url, iter_llms_full_txt, render_document, render_llms_txt
from ..models import Document
from ..registry import content_registry

__all__ = [
    "Listed",
    "absolute_url",
    "at_url",
    "in_order",
    "listed_after",
    "llms_full_txt",
    "llms_txt",
    "markdown",
    "model_label",
    "published_day",
    "source_objects",
]


def in_order(document_ids: Iterable[int]) -> list[Document]:
    """The documents ``document_ids`` name, in that order (one query; an id whose document is gone is left out)."""
    ids = list(document_ids)
    documents = Document.objects.in_bulk(ids)
    return [documents[pk] for pk in ids if pk in documents]


def source_objects(documents: list[Document], labels: set[str]) -> dict[int, Any]:
    """Document pk -> the object it was made from, for the documents of the models ``labels`` name (one query
    per model; a document whose object is gone is left out)."""
    wanted: dict[int, list[Document]] = defaultdict(list)
    for document in documents:
        wanted[document.content_type_id].append(document)
    found: dict[int, Any] = {}
    for content_type_id, group in wanted.items():
        model = ContentType.objects.get_for_id(content_type_id).model_class()
        if model is None or model._meta.label_lower not in labels:
            continue
        objects = model._default_manager.in_bulk([document.object_id for document in group])
        by_key = {str(key): value for key, value in objects.items()}
        for document in group:
            if (obj := by_key.get(document.object_id)) is not None:
                found[document.pk] = obj
    return found


def published_day(document: Document) -> str | None:
    """The UTC day (ISO) of the document's ``published_at``, the day the date filters match it on; None without."""
    return utc_day(document.published_at)


class Listed(NamedTuple):
    pk: int
    url: str
    title: str
    summary: str


def listed_after(after: int, limit: int) -> list[Listed]:
    """Up to ``limit`` of the registered models' documents whose pk is over ``after``, in pk order: a page of a
    listing whose cursor is the last pk it gave."""
    rows = (
        documents_of(content_registry)
        .filter(pk__gt=after)
        .order_by("pk")
        .values_list("pk", "url", "title", "summary")[:limit]
    )
    return [Listed(*row) for row in rows]


def at_url(paths: set[str], urls: set[str] | None = None) -> Document | None:
    """The registered models' document at one of ``paths`` (the first made, if several are), and when ``urls`` are
    given, whose stored URL is one of them too (an object whose ``get_url`` names another host)."""
    documents = documents_of(content_registry).filter(path__in=paths).select_related("content_type")
    if urls is not None:
        documents = documents.filter(url__in=urls)
    return documents.order_by("pk").first()


def model_label(document: Document) -> str:
    """The ``app_label.model`` of the model ``document`` was made from, whose content signals it has."""
    return f"{document.content_type.app_label}.{document.content_type.model}"


def markdown(document: Document, base_url: str) -> str:
    """``document`` as the markdown page the site serves for its object."""
    return render_document(document, base_url)


def llms_txt(base_url: str) -> str:
    """The site's ``/llms.txt``."""
    return render_llms_txt(state.snapshot(), base_url)


def llms_full_txt(base_url: str) -> Iterator[str]:
    """The site's ``/llms-full.txt``, in pieces, as it is built."""
    return iter_llms_full_txt(state.snapshot(), base_url)
