"""What a search of the site's content is narrowed to: the :class:`Filters` a question carries to retrieval.

A front door reads the constraints its protocol puts on a search (NLWeb's ``itemType``, price range and dates) and
asks :func:`narrowed` for the filters; what the site cannot narrow by (a type it has no document of, a price where no
model has one) is said in the :class:`Narrowed` it gets back, for the door to warn of in its own words.

A document's schema.org type is its object's own (``ContentConfig.get_schema_type``), else one inferred from its
AHP content type (:func:`rendered_type`): a search by type matches what the result shows. Narrowing by a type or a
price is a query of document ids that retrieval applies as a subquery, never a list read into Python: ``over 0`` is
every product of the shop.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import FieldDoesNotExist
from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast

from ..models import Document
from ..registry import ContentConfig, content_registry
from ..retrieval.hybrid import Filters
from . import errors

__all__ = [
    "TYPE_OF_CONTENT",
    "Filters",
    "Narrowed",
    "item_types",
    "narrowed",
    "nothing",
    "of_sections",
    "of_type",
    "rendered_type",
]

#: The schema.org type of a document whose object names none, by its AHP content type (else ``WebPage``).
TYPE_OF_CONTENT = {
    "media/video": "VideoObject",
    "media/audio": "AudioObject",
    "media/image": "ImageObject",
    "file/download": "DigitalDocument",
    "application/data": "Thing",
}


def rendered_type(schema_type: str, ahp_content_type: str) -> str:
    """The schema.org type of a document with this stored ``schema_type`` (its object's own) and content type."""
    return schema_type or TYPE_OF_CONTENT.get(ahp_content_type, "WebPage")


def of_type(documents: QuerySet[Document], name: str) -> QuerySet[Document]:
    """The ``documents`` whose schema.org type is ``name`` (in any letter case): the rule of :func:`rendered_type`,
    as a query on each document's own type."""
    wanted = name.lower()
    inferred = [kind for kind, type_name in TYPE_OF_CONTENT.items() if type_name.lower() == wanted]
    untyped = Q(schema_type="", ahp_content_type__in=inferred)
    if wanted == "webpage":
        untyped |= Q(schema_type="") & ~Q(ahp_content_type__in=list(TYPE_OF_CONTENT))
    return documents.filter(Q(schema_type__iexact=name) | untyped)


def nothing() -> Filters:
    """Filters that leave every document out (a search of another site's content)."""
    return Filters(documents=[])


@dataclass
class Narrowed:
    filters: Filters
    #: A type was asked for and no document of the site has it (the search finds nothing).
    type_unknown: bool = False
    #: A price range was asked for and no model in the search has a price (it is not applied).
    unpriced: bool = False


def narrowed(
    *,
    item_type: str | None = None,
    price: tuple[Decimal | None, Decimal | None] | None = None,
    published_after: datetime.datetime | None = None,
    published_before: datetime.datetime | None = None,
) -> Narrowed:
    """The filters of a search of the documents of schema.org type ``item_type``, whose object's ``price`` field is
    within ``price`` (low, high; either may be open), published in the range given."""
    configs = list(content_registry)
    result = Narrowed(Filters())
    models: list[str] = []
    documents: list[int] | QuerySet | None = None
    if item_type:
        models, documents = _typed(configs, item_type)
        result.type_unknown = not models
    if price is not None:
        scope = [c for c in configs if not item_type or c.label in models]
        priced = _priced(scope, *price)
        if priced is None:
            result.unpriced = True
        elif documents is None:
            documents = priced
        elif isinstance(documents, QuerySet):  # (not an empty list: no document has the type)
            documents = documents.filter(pk__in=priced)
    result.filters = Filters(
        models=models, published_after=published_after, published_before=published_before, documents=documents
    )
    return result


def item_types() -> list[str]:
    """The schema.org types of the site's documents (of the registered models)."""
    content_types = ContentType.objects.get_for_models(*(c.model for c in content_registry)).values()
    rows = Document.objects.filter(content_type__in=list(content_types))
    pairs = rows.values_list("schema_type", "ahp_content_type").distinct()
    return sorted({rendered_type(schema_type, kind) for schema_type, kind in pairs})


def _typed(configs: list[ContentConfig], item_type: str) -> tuple[list[str], list[int] | QuerySet | None]:
    """The models with documents of the schema.org type ``item_type``, and a query of those documents' ids, or None
    when they are all their models' documents (the models say it); none at all, no models and an empty list."""
    content_types = ContentType.objects.get_for_models(*(c.model for c in configs))
    # The labels the documents carry (a registered proxy's are its model's: ContentConfig.label).
    label_of = {config.model: config.label for config in configs}
    labels = {content_type.pk: label_of[model] for model, content_type in content_types.items()}
    registered = Document.objects.filter(content_type__in=list(labels))
    matching = of_type(registered, item_type)
    found = set(matching.values_list("content_type", flat=True).distinct())
    models = sorted(labels[pk] for pk in found)
    if not models:
        return [], []
    # Models whose objects are all of one type (the usual case) need no list of documents.
    if not registered.filter(content_type__in=found).exclude(pk__in=matching.values("pk")).exists():
        return models, None
    return models, matching.values_list("pk", flat=True)  # a subquery of retrieval, not a list


def _priced(configs: list[ContentConfig], low: Decimal | None, high: Decimal | None) -> QuerySet | None:
    """A query of the ids of the documents of the models with a ``price`` field whose price is from ``low`` to
    ``high`` (None: no such model)."""
    found: Q | None = None
    for config in configs:
        try:
            config.model._meta.get_field("price")
        except FieldDoesNotExist:
            continue
        objects = config.model._default_manager.all()
        if low is not None:
            objects = objects.filter(price__gte=low)
        if high is not None:
            objects = objects.filter(price__lte=high)
        ids = objects.annotate(id_text=Cast("pk", CharField())).values("id_text")  # a subquery, not a list
        content_type = ContentType.objects.get_for_model(config.model)
        of_model = Q(content_type=content_type, object_id__in=ids)
        found = of_model if found is None else found | of_model
    return None if found is None else Document.objects.filter(found).values_list("pk", flat=True)


def of_sections(
    sections: list[str],
    *,
    content_types: list[str],
    published_after: datetime.datetime | None,
    published_before: datetime.datetime | None,
    field: str,
) -> Filters:
    """The filters of a search narrowed to the site's ``sections`` (each a section's name or a model's label; a
    section may hold several models: it filters to all of them), AHP content types and a publication window. A
    section the site does not have is :class:`~.errors.InvalidInput` naming ``field`` and listing those it has."""
    models: list[str] = []
    known: dict[str, list[str]] = {}
    for config in content_registry:
        known.setdefault(config.get_section().lower(), []).append(config.label)
    for name in sections:
        labels = known.get(name.lower()) or [name.lower()]
        try:
            models.extend(content_registry.get_config_by_label(label).label for label in labels)
        except LookupError as exc:
            raise errors.InvalidInput(
                f"{field}: unknown section {name!r}.", fields=[field], available_sections=sorted(known)
            ) from exc
    return Filters(
        models=models,
        content_types=content_types,
        published_after=published_after,
        published_before=published_before,
    )
