"""Receivers that keep agent documents and the cached manifest in step with the database and the registries.

Connected for registered models only, by ``register()`` once the models are loaded (in an ``agents`` module, an app's
``ready()``, a test) and by ``AppConfig.ready()`` for those registered before. Work is deferred to
``transaction.on_commit`` so a rolled-back save changes nothing and the handler sees committed rows. A model
registered or unregistered after start-up also brings the built-in capabilities in step (its ``get_<model>``,
``site_info``'s pages); the snapshot follows every registry change by itself (``state``).
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from typing import Any

from celery import current_app
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Field, Model, Q
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

from . import signals, state
from .concierge.capabilities import content_registry_changed
from .concierge.purging import purge_after_write
from .concierge.routing import forget_site_examples
from .indexing import index_on_save_mode, sync_and_index
from .models import ContentSignalOverride, IdempotencyRecord, RoutingExample, SeenSignature, SiteProfile
from .registry import ContentConfig, content_registry, followed_model, followed_relation

logger = logging.getLogger(__name__)

#: In "sync" mode, how many registered objects one save or delete of an object they follow (``ContentConfig.follow``)
#: re-indexes in the request, after its commit. Each costs a document write and, when its text changed, embedding
#: its passages (milliseconds with the default backend, a round trip to an embedding server with others): renaming
#: an author of 10,000 posts would hold the request for minutes. The rest are logged, with the ``agent_reindex``
#: command that brings them up to date; "celery" mode queues them all.
FOLLOW_SYNC_LIMIT = 200

#: In "celery" mode, how many of those objects one ``agent_handshake.index_objects`` message carries: an author of
#: 10,000 posts is 40 messages, not 10,000, and a batch still finishes well within a worker's time limits.
FOLLOW_BATCH_SIZE = 250


def _reindex_on_commit(model: type[Model], pk: Any, using: str) -> None:
    """Queue the re-indexing of ``model``'s object ``pk`` for when the transaction commits (``INDEX_ON_SAVE``)."""
    mode = index_on_save_mode()
    meta = model._meta
    # Strings, not the instance: the task may run in another process, after the row changed again.
    args = (meta.app_label, meta.model_name, str(pk))
    # On the commit of the database the row was written to: a save on another alias waited for ``default``'s
    # transaction, or ran at once when it had none, before its own commit, and found nothing to index.
    if mode == "celery":
        transaction.on_commit(partial(_queue, *args), using=using)
    elif mode == "sync":
        transaction.on_commit(partial(_index_now, *args), using=using)


def _queue(app_label: str, model_name: str, pk: str) -> None:
    # Found by name: agent_handshake.tasks defines the indexing tasks and imports what these handlers call.
    index_object = current_app.tasks["agent_handshake.index_object"]
    try:
        # One attempt: Celery's publish retries would hold the saving request (and every save of a bulk change)
        # for seconds each while the broker is down; indexing here is the better fallback.
        index_object.apply_async((app_label, model_name, pk), retry=False)
    except Exception:
        # The row is saved: a broker that cannot be reached must not turn the save into an error page. Index
        # here instead, so the change is not lost.
        logger.warning(
            "Could not queue agent_handshake.index_object for %s.%s %s; indexing it in this process.",
            app_label,
            model_name,
            pk,
            exc_info=True,
        )
        _index_now(app_label, model_name, pk)


def _index_now(app_label: str, model_name: str, pk: str) -> None:
    try:
        sync_and_index(app_label, model_name, pk)
    except Exception:
        # E.g. the embedding server is down. The document is written first, so its passages stay marked stale
        # (indexed_hash != content_hash) and `manage.py agent_reindex` embeds them later.
        logger.exception(
            "Could not index %s.%s %s; run `manage.py agent_reindex` once the cause is fixed.",
            app_label,
            model_name,
            pk,
        )
    finally:
        state.invalidate()


def registered_rows(model: type[Model]) -> list[tuple[type[Model], Field | None]]:
    """The registered models whose objects a save through ``model`` writes, each with the field of ``model`` that
    holds its object's key (None: the instance's own pk). Django's signals name only the class saved: its proxies
    and the model it proxies share its table, and the parents of multi-table inheritance have a row saved with it.

    A table's documents are keyed by its concrete model's content type, so of the registered models on one table
    one has them: the class saved when it is registered, else the concrete model, else the registered proxies. A
    model unregistered since keeps its receivers, and finds nothing here.
    """
    concrete = model._meta.concrete_model
    registered = [config.model for config in content_registry.configs()]
    found: list[tuple[type[Model], Field | None]] = []
    for table in (concrete, *concrete._meta.get_parent_list()):
        on_table = [other for other in registered if other._meta.concrete_model is table]
        link = None if table is concrete else concrete._meta.get_ancestor_link(table)
        if model in on_table:
            on_table = [model]
        elif table in on_table:
            on_table = [table]
        found += [(other, link) for other in on_table]
    return found


def object_saved(
    sender: type[Model], instance: Model, raw: bool = False, using: str = DEFAULT_DB_ALIAS, **kwargs: Any
) -> None:
    # Fixture loading (raw=True) saves rows before their relations exist; `agent_reindex` follows it.
    if raw:
        return
    for model, link in registered_rows(sender):
        _reindex_on_commit(model, instance.pk if link is None else getattr(instance, link.attname), using)
    for model in registered_children(sender):
        # The parent saved directly (its admin, a script): the child that shows this row, if there is one.
        parent = sender._meta.concrete_model
        children = model._base_manager.using(using).filter(**{parent._meta.pk.name: instance.pk})
        for pk in children.values_list("pk", flat=True):
            _reindex_on_commit(model, pk, using)


def registered_children(model: type[Model]) -> list[type[Model]]:
    """The registered models of multi-table inheritance below ``model``'s table, whose objects show a row that a
    save of ``model`` itself (a parent saved as the parent) writes without naming them."""
    concrete = model._meta.concrete_model
    return [
        config.model
        for config in content_registry.configs()
        if concrete in config.model._meta.concrete_model._meta.get_parent_list()
    ]


def object_deleted(sender: type[Model], instance: Model, using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    # Only the deleted class's own table: deleting a child of multi-table inheritance deletes its parents' rows
    # too, and Django sends their own post_delete for them.
    for model, link in registered_rows(sender):
        if link is None:
            _reindex_on_commit(model, instance.pk, using)


def relations_changed(
    sender: type[Model],
    instance: Model,
    action: str,
    reverse: bool,
    model: type[Model],
    pk_set: set[Any] | None,
    using: str = DEFAULT_DB_ALIAS,
    **kwargs: Any,
) -> None:
    """Re-index the registered objects on either side of a many-to-many change.

    ``post.tags.add(tag)`` changes ``instance`` (the post); ``tag.posts.add(post)`` changes the objects of
    ``model`` in ``pk_set`` (the posts). ``clear()`` sends no ``pk_set``: the linked objects are read before the
    rows go (Django runs add, remove and clear in a transaction, so the work still happens after the commit).
    """
    if action in ("post_add", "post_remove", "post_clear"):
        for registered in _on_table(type(instance)):
            _reindex_on_commit(registered, instance.pk, using)
    others = _on_table(model)
    if not others:
        return
    if action in ("post_add", "post_remove") and pk_set:
        pks = list(pk_set)  # no query: indexing reads each object itself (and drops what is no longer published)
    elif action == "pre_clear":
        pks = list(_linked(sender, instance, reverse, model).using(using).values_list("pk", flat=True))
    else:
        return
    for registered in others:
        for pk in pks:
            _reindex_on_commit(registered, pk, using)


def _on_table(model: type[Model]) -> list[type[Model]]:
    """The registered models whose objects are the rows of ``model``'s own table (``model``, a proxy of it or the
    model it proxies): a many-to-many change is a change of those, not of a parent's row."""
    return [registered for registered, link in registered_rows(model) if link is None]


def _linked(through: type[Model], instance: Model, reverse: bool, model: type[Model]):
    """The objects of ``model`` linked to ``instance`` by the many-to-many relation stored in ``through``."""
    owner = model if reverse else type(instance)  # the model that declares the ManyToManyField
    field = next(field for field in owner._meta.many_to_many if field.remote_field.through is through)
    if reverse:
        # The base manager: a default manager that hides rows (unpublished ones) would leave them stale.
        return model._base_manager.filter(**{field.name: instance.pk})
    return model._base_manager.filter(**{field.related_query_name(): instance.pk})


def _follower_conditions(
    sender: type[Model], instance: Model, saved: bool, created: bool = False
) -> dict[type[Model], Q]:
    """The registered models that follow (``ContentConfig.follow``) the row of ``instance``, each with the filter of
    their objects that reach it. As for a registered model's own rows, a followed model's rows are written by the
    model, its proxies and its children of multi-table inheritance; and a parent saved as itself writes a row that
    its children show. A delete needs only the first: deleting a child deletes its parents' rows too, and Django
    sends their own signals for them. A new row is reached only where it holds the key itself (the path ends with a
    reverse relation, "comments"), not where a follower would have to point at it already ("author")."""
    written = sender._meta.concrete_model
    conditions: dict[type[Model], Q] = {}
    for config in content_registry.configs():
        for path in _follow_paths(config):
            try:
                relation = followed_relation(config.model, path)
            except ValueError:
                continue  # E018 names it
            if created and not (relation.one_to_many or (relation.one_to_one and not relation.concrete)):
                continue
            target = relation.related_model._meta.concrete_model
            # By the followed row's primary key, named: a ForeignKey with to_field (a country by its code) stores,
            # and compares ``path=value`` with, that other key (no join where the key it stores is the pk).
            if target is written:
                condition = Q(**{f"{path}__pk": instance.pk})
            elif saved and target in written._meta.get_parent_list():
                condition = Q(**{f"{path}__pk": getattr(instance, written._meta.get_ancestor_link(target).attname)})
            elif saved and written in target._meta.get_parent_list():
                condition = Q(**{f"{path}__{written._meta.pk.name}": instance.pk})
            else:
                continue
            conditions[config.model] = conditions[config.model] | condition if config.model in conditions else condition
    return conditions


def _follow_paths(config: ContentConfig) -> tuple[str, ...]:
    return tuple(config.follow) if isinstance(config.follow, (list, tuple)) else ()  # E018 names anything else


def _followers(model: type[Model], condition: Q, using: str) -> list[Any]:
    """The keys of ``model``'s objects matching ``condition``: all of them, not only those in the config's queryset
    (indexing removes the documents of the others), and each once (a path through a to-many relation repeats)."""
    rows = model._base_manager.using(using).filter(condition).order_by().values_list("pk", flat=True)
    return list(dict.fromkeys(rows))


def _read_followers(model: type[Model], condition: Q, using: str) -> list[Any]:
    """:func:`_followers`, in the editor's request: a query that fails (the follower's table not migrated yet, a
    lock or statement timeout) is logged and finds none, so the save or delete it follows still succeeds. In a
    savepoint: a failed query would otherwise abort the delete's transaction, or the one the save is part of."""
    try:
        with transaction.atomic(using=using):
            return _followers(model, condition, using)
    except Exception:
        label = model._meta.label_lower
        logger.exception(
            "Could not find the objects of %s that follow a changed object, so they were not re-indexed; run "
            "`manage.py agent_reindex --model %s` once the cause is fixed.",
            label,
            label,
        )
        return []


def followed_saved(
    sender: type[Model],
    instance: Model,
    created: bool = False,
    raw: bool = False,
    using: str = DEFAULT_DB_ALIAS,
    **kwargs: Any,
) -> None:
    """An object that registered objects follow was saved: re-index them once it is committed (``INDEX_ON_SAVE``).
    Fixture loading (raw) is followed by ``agent_reindex``."""
    if raw:
        return
    mode = index_on_save_mode()
    if mode == "off":
        return
    connection = transaction.get_connection(using)
    for model, condition in _follower_conditions(sender, instance, saved=True, created=created).items():
        # Read on commit, as committed: one query in the request, whatever the mode.
        reindex = _FollowersReindex(model, condition, using, mode)
        # Once per commit: an object saved again in the same transaction (a form, then a signal's update) finds its
        # followers queued already. Only callbacks still pending count: those of a savepoint rolled back are gone,
        # and one that ran is done (tests' captureOnCommitCallbacks runs them and leaves them in the list).
        if any(entry[1] == reindex and not entry[1].ran for entry in connection.run_on_commit):
            continue
        transaction.on_commit(reindex, using=using)


def followed_deleting(sender: type[Model], instance: Model, using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """An object that registered objects follow is about to be deleted: re-index them once that is committed. They
    are read now, before the delete: ``on_delete=SET_NULL`` empties their relation with one UPDATE that sends no
    signal, and then nothing would find them. (``CASCADE`` deletes them with their own signals, which remove their
    documents; reading them here too only repeats that.)"""
    mode = index_on_save_mode()
    if mode == "off":
        return
    for model, condition in _follower_conditions(sender, instance, saved=False).items():
        pks = _read_followers(model, condition, using)
        if pks:
            transaction.on_commit(partial(_reindex_remaining, model, pks, using, mode), using=using)


def _reindex_remaining(model: type[Model], pks: list[Any], using: str, mode: str) -> None:
    """Re-index those of ``model``'s objects ``pks``, read before a delete, that it left (``SET_NULL``): those it
    deleted with it (``CASCADE``) had their documents removed by their own signals, and re-indexing them again, or
    logging them as left over ``FOLLOW_SYNC_LIMIT``, would only cost time and send the operator to agent_reindex."""
    _reindex_many(model, _read_followers(model, Q(pk__in=pks), using), mode)


@dataclasses.dataclass
class _FollowersReindex:
    """Re-index, on commit, the objects of ``model`` matching ``condition``; equal for one object's repeated saves."""

    model: type[Model]
    condition: Q
    using: str
    mode: str
    ran: bool = dataclasses.field(default=False, compare=False)

    def __call__(self) -> None:
        self.ran = True
        _reindex_many(self.model, _read_followers(self.model, self.condition, self.using), self.mode)


def _reindex_many(model: type[Model], pks: list[Any], mode: str) -> None:
    """Re-index ``model``'s objects ``pks`` (after a commit): "celery" queues them in batches of
    :data:`FOLLOW_BATCH_SIZE` (``agent_handshake.index_objects``); "sync", or a broker that cannot be reached,
    indexes at most :data:`FOLLOW_SYNC_LIMIT` of them here."""
    meta = model._meta
    left = _queue_all(meta.app_label, meta.model_name, pks) if mode == "celery" else pks
    for pk in left[:FOLLOW_SYNC_LIMIT]:
        _index_now(meta.app_label, meta.model_name, str(pk))
    if len(left) > FOLLOW_SYNC_LIMIT:
        logger.warning(
            "%d objects of %s show a changed object they follow and were not re-indexed (over the %d indexed in "
            "the request); run `manage.py agent_reindex --model %s`, or index on save with Celery.",
            len(left) - FOLLOW_SYNC_LIMIT,
            meta.label_lower,
            FOLLOW_SYNC_LIMIT,
            meta.label_lower,
        )


def _queue_all(app_label: str, model_name: str, pks: list[Any]) -> list[Any]:
    """Queue ``agent_handshake.index_objects`` for the objects, :data:`FOLLOW_BATCH_SIZE` a message, over one broker
    connection; the keys not queued (a broker that cannot be reached: the first failure stops, each further try
    would wait as long)."""
    index_objects = current_app.tasks["agent_handshake.index_objects"]
    queued = 0
    try:
        with index_objects.app.producer_or_acquire() as producer:
            for start in range(0, len(pks), FOLLOW_BATCH_SIZE):
                batch = [str(pk) for pk in pks[start : start + FOLLOW_BATCH_SIZE]]
                index_objects.apply_async((app_label, model_name, batch), retry=False, producer=producer)
                queued += len(batch)
    except Exception:
        # As for a save (_queue): the change is committed and must not become an error page.
        logger.warning(
            "Could not queue agent_handshake.index_objects for %d objects of %s.%s; indexing up to %d of them in "
            "this process.",
            len(pks) - queued,
            app_label,
            model_name,
            FOLLOW_SYNC_LIMIT,
            exc_info=True,
        )
        return pks[queued:]
    return []


def settings_saved(sender: type[Model], **kwargs: Any) -> None:
    transaction.on_commit(state.invalidate)


def routing_example_changed(sender: type[Model], **kwargs: Any) -> None:
    transaction.on_commit(forget_site_examples)


def record_written(sender: type[Model], created: bool, raw: bool = False, **kwargs: Any) -> None:
    """A new idempotency record or accepted signature: purge expired ones after the commit (concierge/purging.py)."""
    if created and not raw:
        transaction.on_commit(partial(purge_after_write, sender))


def connect_model(model: type[Model]) -> None:
    """Keep the documents of ``model``, a registered model, in step with its rows. Connecting it again changes
    nothing (each receiver has a ``dispatch_uid``)."""
    # Every class that writes its rows: itself, the model it proxies and that model's other proxies, and the
    # children of multi-table inheritance and their proxies, which are all subclasses of the concrete model, and its
    # parents saved as themselves. One receiver per class, whichever registered model connected it (the
    # dispatch_uid is keyed with the sender).
    for writer in {model, *_writers(model._meta.concrete_model)}:
        post_save.connect(object_saved, sender=writer, dispatch_uid="agent_handshake:content")
        post_delete.connect(object_deleted, sender=writer, dispatch_uid="agent_handshake:content")
    # Both sides: the model's own many-to-many fields and those of other models that point at it.
    throughs = [field.remote_field.through for field in model._meta.many_to_many]
    throughs += [rel.through for rel in model._meta.related_objects if rel.many_to_many]
    for through in throughs:
        # One receiver per relation, even when both of its models are registered.
        m2m_changed.connect(relations_changed, sender=through, dispatch_uid="agent_handshake:m2m")
    if content_registry.is_registered(model):
        connect_follow(content_registry.get_config(model))


def connect_follow(config: ContentConfig) -> None:
    """Re-index ``config``'s objects when an object they follow (``follow``) is saved or deleted, through whichever
    class writes its row."""
    for path in _follow_paths(config):
        try:
            target = followed_model(config.model, path)._meta.concrete_model
        except ValueError:
            continue  # E018 names it
        for writer in _writers(target):
            post_save.connect(followed_saved, sender=writer, dispatch_uid="agent_handshake:follow")
            pre_delete.connect(followed_deleting, sender=writer, dispatch_uid="agent_handshake:follow")


def _writers(concrete: type[Model]) -> set[type[Model]]:
    """The classes whose saves write a row of the concrete model ``concrete``: itself and its proxies, the children
    of multi-table inheritance and their proxies (all subclasses of it), and its parents (and their proxies) saved
    as themselves, which write a row of it too."""
    writers = _subclasses(concrete)
    for parent in concrete._meta.get_parent_list():
        writers |= {writer for writer in _subclasses(parent) if writer._meta.concrete_model is parent}
    return writers


def _subclasses(model: type[Model]) -> set[type[Model]]:
    """``model`` and the models that inherit from it, at any depth."""
    found = {model}
    for child in model.__subclasses__():
        if not child._meta.abstract:
            found |= _subclasses(child)
    return found


def model_registered(sender: type[Model], **kwargs: Any) -> None:
    connect_model(sender)


def connect() -> None:
    """Connect the app's receivers; called by ``AppConfig.ready()`` once the built-in capabilities are registered
    (a receiver that brought them in step while the ``agents`` modules registered their models would have taken the
    names of the sites' own capabilities registered after them)."""
    for model in content_registry.models():
        connect_model(model)
    signals.model_registered.connect(model_registered, dispatch_uid="agent_handshake:registered")
    for signal in (signals.model_registered, signals.model_unregistered):
        signal.connect(content_registry_changed, dispatch_uid="agent_handshake:capabilities")
    for model in (SiteProfile, ContentSignalOverride):
        post_save.connect(settings_saved, sender=model, dispatch_uid="agent_handshake:settings")
        post_delete.connect(settings_saved, sender=model, dispatch_uid="agent_handshake:settings")
    post_save.connect(routing_example_changed, sender=RoutingExample, dispatch_uid="agent_handshake:routing")
    post_delete.connect(routing_example_changed, sender=RoutingExample, dispatch_uid="agent_handshake:routing")
    for model in (IdempotencyRecord, SeenSignature):
        post_save.connect(record_written, sender=model, dispatch_uid="agent_handshake:purge")
