"""Keeping :class:`~agent_handshake.models.Document` rows in step with the registered objects."""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from celery import current_app
from django.contrib.contenttypes.models import ContentType
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from . import signals, state
from .conf import app_settings
from .models import Document
from .registry import ContentConfig, content_registry
from .retrieval.embeddings import EmbeddingUnavailable
from .retrieval.index import EmbeddingModelChanged, delete_passages, index_document, index_documents, lock_documents

logger = logging.getLogger(__name__)


def index_on_save_mode() -> str:
    """The effective ``INDEX_ON_SAVE``: "celery", "sync" or "off" ("auto" resolved).

    "auto" queues to Celery only when the project's Celery app names a broker (``CELERY_BROKER_URL`` with the
    standard Django setup): without one, Celery would try amqp://localhost on every save.
    """
    mode = app_settings.INDEX_ON_SAVE
    if mode != "auto":
        return mode
    conf = current_app.conf
    return "celery" if conf.broker_url or conf.broker_write_url else "sync"


def _as_datetime(value: Any) -> datetime.datetime | None:
    """The moment stored for a ``published_at``: a datetime as it is (a naive one in the site's time zone); a
    calendar date as its midnight in UTC, whatever ``TIME_ZONE``. A date has no time zone, and every door shows
    and filters UTC days (a filter's day alone is its midnight UTC): the day an editor typed is the day agents see
    and find. (Midnight in ``TIME_ZONE`` showed a Berlin site's 2024-03-10 as 2024-03-09.)"""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value if timezone.is_aware(value) else timezone.make_aware(value)
    if isinstance(value, datetime.date):
        return datetime.datetime.combine(value, datetime.time.min, tzinfo=datetime.timezone.utc)
    raise TypeError(f"published_at must be a date or datetime, not {type(value).__name__}")


def utc_day(moment: datetime.datetime | None) -> str | None:
    """The UTC day of a stored ``published_at`` (ISO), the day the date filters match it on: a calendar date's is
    the date itself (:func:`_as_datetime`). Without ``USE_TZ`` the database gives naive datetimes in the site's time
    zone: 00:00 UTC read in Los Angeles is the evening before."""
    if moment is None:
        return None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment.astimezone(datetime.timezone.utc).date().isoformat()


def storable(value: Any) -> Any:
    """``value`` (a string, or dicts and lists of them) as PostgreSQL can store it: without NUL characters, which
    neither text nor jsonb may hold, and with each lone UTF-16 surrogate, which UTF-8 cannot encode, as U+FFFD (a
    pair is joined into its character). Text a config extracts from a file or a feed may hold either; before, its
    document could not be written at all."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "")
        try:
            value.encode()
        except UnicodeEncodeError:
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value


def document_fields(config: ContentConfig, obj: Model) -> dict[str, Any]:
    """What the Document for ``obj`` holds, with a hash of it to skip unchanged objects."""
    payload = storable(json.loads(json.dumps(config.get_payload(obj), cls=DjangoJSONEncoder)))
    url = storable(config.get_url(obj))
    fields = {
        "url": url,
        "path": urlsplit(url).path,
        "title": storable(config.get_title(obj))[:500],
        "summary": storable(config.get_summary(obj)),
        "markdown": storable(config.get_markdown(obj)),
        "published_at": _as_datetime(config.get_published_at(obj)),
        "schema_type": storable(config.get_schema_type(obj)),
        "ahp_content_type": config.content_type,
        "payload": payload,
    }
    digest = json.dumps(fields, cls=DjangoJSONEncoder, sort_keys=True)
    fields["content_hash"] = hashlib.sha256(digest.encode()).hexdigest()
    return fields


def lock_objects(content_type: ContentType, object_ids: Iterable[str]) -> None:
    """Hold, until the transaction ends, the locks of the documents of these objects (whether they exist or not).

    Every write and removal of a document holds its object's lock and reads the object once it holds it, so two
    runs for one object (a save's task, an unpublish's, ``agent_reindex``) take turns and the later one decides
    from the object as it is then: a removal that read the object before it was published again can no longer
    delete the document the publishing save's run wrote (or is writing) meanwhile. A lock of the document's row
    would not do: before the first save there is no row. Keys are taken in order, so runs over overlapping
    batches cannot deadlock; two ids of one hash share a lock, which only makes them take turns.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, key) FROM "
            "(SELECT DISTINCT hashtext(object_id) AS key FROM unnest(%s::text[]) AS object_id ORDER BY key) AS keys",
            [content_type.pk, list(object_ids)],
        )


def sync_object(app_label: str, model_name: str, pk: Any) -> str:
    """Create, update or delete the Document of one object. Returns "created", "updated", "unchanged" or
    "deleted" (the object is gone or no longer in the config's queryset)."""
    config = content_registry.get_config_by_label(f"{app_label}.{model_name}")
    content_type = ContentType.objects.get_for_model(config.model)
    obj = config.get_queryset().filter(pk=pk).first()
    if obj is not None:
        return _store(config, content_type, obj)
    documents = Document.objects.filter(content_type=content_type, object_id=str(pk))
    with transaction.atomic():
        lock_objects(content_type, [str(pk)])
        lock_documents(documents)  # and its row, which an index run writing the document's passages holds
        # Read again once the locks are ours: an object published again while this waited for them (another run
        # writing its document) must keep its document, not lose it to this run's earlier read.
        obj = config.get_queryset().filter(pk=pk).first()
        deleted = 0
        if obj is None:
            delete_passages(documents)
            deleted, _ = documents.delete()
    if deleted:
        signals.document_removed.send(sender=config.model, object_id=str(pk))
        return "deleted"
    if obj is None:
        return "unchanged"
    return _store(config, content_type, obj)


def _store(config: ContentConfig, content_type: ContentType, obj: Model, existing: str | None = None) -> str:
    fields = document_fields(config, obj)
    if existing == fields["content_hash"]:
        return "unchanged"
    object_id = str(obj.pk)
    with transaction.atomic():
        lock_objects(content_type, [object_id])
        # The object was read before the lock. Gone since (a removal that held the lock meanwhile deleted its
        # document, or the one queued by its change will), this run, the later one, must not write it back.
        if not config.get_queryset().filter(pk=obj.pk).exists():
            return "unchanged"
        document, created = Document.objects.get_or_create(
            content_type=content_type, object_id=object_id, defaults=fields
        )
        if not created:
            if document.content_hash == fields["content_hash"]:
                return "unchanged"
            for name, value in fields.items():
                setattr(document, name, value)
            # Not indexed_hash: an index run may have written it since this row was read.
            document.save(update_fields=[*fields, "updated_at"])
    signals.document_indexed.send(sender=config.model, document=document, created=created)
    return "created" if created else "updated"


def reindex_model(
    config: ContentConfig,
    *,
    batch_size: int = 500,
    progress: Callable[[int, int], None] | None = None,
    failed: Callable[[str, Exception], None] | None = None,
) -> dict[str, int]:
    """Bring every Document of one model up to date; remove those whose objects are gone.

    Unchanged objects (same content hash) are not written, so running it again after an interruption only
    does the remaining work. An object that cannot be indexed (its config raises, e.g. a ``get_absolute_url``
    that cannot reverse an empty slug, or gives a value the table refuses) is logged, counted as "failed" and
    passed to ``failed`` with the error; its document stays as it was, and the run goes on with the others.
    """
    content_type = ContentType.objects.get_for_model(config.model)
    hashes = dict(
        Document.objects.filter(content_type=content_type).values_list("object_id", "content_hash").iterator()
    )
    counts = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    queryset = config.get_queryset().order_by("pk")
    total = queryset.count()
    seen: set[str] = set()
    for done, obj in enumerate(queryset.iterator(chunk_size=batch_size), start=1):
        object_id = str(obj.pk)
        seen.add(object_id)
        try:
            with transaction.atomic():
                counts[_store(config, content_type, obj, existing=hashes.get(object_id))] += 1
        except (OperationalError, InterfaceError):
            raise  # the database itself, not this object: every other object would fail the same way
        except Exception as exc:
            # One object must not stop the run: before, the objects after it, the removal of unpublished objects'
            # documents and every later model waited on a fix of that one object.
            logger.exception("Could not index %s %s", config.label, object_id)
            counts["failed"] += 1
            if failed:
                failed(object_id, exc)
        if progress:
            progress(done, total)
    stale = [object_id for object_id in hashes if object_id not in seen]
    deleted = 0
    for start in range(0, len(stale), batch_size):
        chunk = stale[start : start + batch_size]
        with transaction.atomic():
            lock_objects(content_type, chunk)
            # Read again once the locks are ours: an object published (or created) again since the run read the
            # queryset has its document written by its own save, which a stale view must not delete.
            back = {str(pk) for pk in config.get_queryset().filter(pk__in=chunk).values_list("pk", flat=True)}
            chunk = [object_id for object_id in chunk if object_id not in back]
            documents = Document.objects.filter(content_type=content_type, object_id__in=chunk)
            delete_passages(documents)
            documents.delete()
        deleted += len(chunk)
        for object_id in chunk:
            signals.document_removed.send(sender=config.model, object_id=object_id)
    counts["deleted"] = deleted
    state.invalidate()
    return counts


def sync_and_index(app_label: str, model_name: str, pk: Any) -> str:
    """Bring one object's document and passages up to date (what a save queues). Returns the document status."""
    status = sync_object(app_label, model_name, pk)
    if status != "deleted":
        config = content_registry.get_config_by_label(f"{app_label}.{model_name}")
        content_type = ContentType.objects.get_for_model(config.model)
        document = (
            Document.objects.select_related("content_type").filter(content_type=content_type, object_id=str(pk)).first()
        )
        if document is not None:
            try:
                index_document(document)
            except EmbeddingModelChanged:
                # Never mix vectors of two models; the document itself is current, its passages wait for a rebuild.
                logger.exception("Passages of %s were not rebuilt", document)
    return status


def index_batch(
    app_label: str, model_name: str, pks: Iterable[Any]
) -> tuple[dict[str, int], list[str], Exception | None]:
    """:func:`sync_and_index` each of one model's objects ``pks`` (a batch of the task ``index_objects``). An
    object that cannot be indexed (its config raises) is logged and counted as "failed", and the others are indexed.
    Returns the count per status, and, when the embedding backend became unavailable, the keys not done yet (from the
    one it failed on) with its error: each of them would wait for it too."""
    keys = [str(pk) for pk in pks]
    counts: dict[str, int] = {}
    for position, pk in enumerate(keys):
        try:
            status = sync_and_index(app_label, model_name, pk)
        except EmbeddingUnavailable as exc:
            return counts, keys[position:], exc
        except (OperationalError, InterfaceError):
            raise  # the database itself, not this object (as in reindex_model)
        except Exception:
            logger.exception(
                "Could not index %s.%s %s; run `manage.py agent_reindex` once the cause is fixed.",
                app_label,
                model_name,
                pk,
            )
            status = "failed"
        counts[status] = counts.get(status, 0) + 1
    return counts, [], None


def index_passages(config: ContentConfig, *, progress: Callable[[int, int], None] | None = None) -> int:
    """Embed the documents of one model whose content changed since their passages were built."""
    content_type = ContentType.objects.get_for_model(config.model)
    stale = (
        Document.objects.select_related("content_type")
        .filter(content_type=content_type)
        .exclude(indexed_hash=F("content_hash"))
        .order_by("pk")
    )
    total = stale.count()
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if progress:
            progress(done, total)

    return index_documents(stale.iterator(chunk_size=200), progress=advance)


def documents_of(configs: Iterable[ContentConfig]) -> QuerySet[Document]:
    """The Documents of the given models."""
    content_types = ContentType.objects.get_for_models(*(config.model for config in configs)).values()
    return Document.objects.filter(content_type__in=list(content_types))


def remove_unregistered(batch_size: int = 500) -> dict[str, int]:
    """Delete the Documents (and their passages) of models no longer registered, or gone: a model unregistered since
    its documents were written keeps them in the table, where nothing serves them any more. Returns the count per
    model label ("app_label.model")."""
    registered = {
        content_type.pk for content_type in ContentType.objects.get_for_models(*content_registry.models()).values()
    }
    removed: dict[str, int] = {}
    left = Document.objects.exclude(content_type__in=registered)
    for content_type_id in left.values_list("content_type", flat=True).distinct():
        content_type = ContentType.objects.get_for_id(content_type_id)
        label = f"{content_type.app_label}.{content_type.model}"
        while ids := list(left.filter(content_type_id=content_type_id).values_list("pk", flat=True)[:batch_size]):
            with transaction.atomic():
                batch = Document.objects.filter(pk__in=ids)
                delete_passages(batch)
                removed[label] = removed.get(label, 0) + batch.delete()[0]
    return removed


def configs_for(labels: Iterable[str] | None) -> list[ContentConfig]:
    """The configs named by model labels ("blog.post"), or all of them."""
    if not labels:
        return list(content_registry)
    return [content_registry.get_config_by_label(label) for label in labels]
