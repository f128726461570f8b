"""The registered content (``agent_handshake.register``): each model once (E003), and each config's options naming
what its model has (E004, E005, E006, E015, E018), with no two registrations sharing a table (E017).

A config is read when an object is saved or reindexed, in a signal handler or a task: a name that does not exist
there logs an error and indexes nothing, so agents simply never see the content. These checks name the config and
the option instead, when the site starts.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Tags, register

from ..content_types import ContentTypeSpec, get_spec
from ..registry import ContentConfig, content_registry, followed_model, is_order


@register(Tags.models)
def check_registry(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = _duplicate_errors()
    for config in content_registry.configs():  # not sorted by order, which E015 checks
        errors += _config_errors(config)
    return errors + _shared_table_errors()


def _duplicate_errors() -> list[Error]:
    return [
        Error(
            f"{model._meta.label} is registered with agent_handshake twice (again with {config_class.__name__}).",
            hint="Register each model once; unregister() it first to replace a registration.",
            obj=config_class,
            id="agent_handshake.E003",
        )
        for model, config_class in content_registry.duplicates
    ]


def _config_errors(config: ContentConfig) -> list[Error]:
    return [
        *_attribute_errors(config),
        *_url_errors(config),
        *_order_errors(config),
        *_follow_errors(config),
        *_content_type_errors(config),
    ]


def _attribute_errors(config: ContentConfig) -> list[Error]:
    """E004: each ``*_field`` option and ``payload_fields`` value names an attribute of the model."""
    model = config.model
    names = {
        "title_field": config.title_field,
        "body_field": config.body_field,
        "summary_field": config.summary_field,
        "published_field": config.published_field,
        **{f"payload_fields[{key!r}]": attribute for key, attribute in config.payload_fields.items()},
    }
    return [
        Error(
            f"{type(config).__name__}.{option} names {attribute!r}, which {model._meta.label} does not have.",
            hint="Name a field, property or method of the model.",
            obj=type(config),
            id="agent_handshake.E004",
        )
        for option, attribute in names.items()
        if attribute and not hasattr(model, attribute)
    ]


def _url_errors(config: ContentConfig) -> list[Error]:
    """E004: the inherited ``get_url()`` calls the model's ``get_absolute_url()``."""
    if type(config).get_url is not ContentConfig.get_url or hasattr(config.model, "get_absolute_url"):
        return []
    # Every object's document needs a URL: without one each save logs an error and indexes nothing.
    name, label = type(config).__name__, config.model._meta.label
    return [
        Error(
            f"{name} uses get_absolute_url() for its objects' URLs, which {label} does not have.",
            hint=f"Give {label} a get_absolute_url() method, or override get_url(obj) in {name}.",
            obj=type(config),
            id="agent_handshake.E004",
        )
    ]


def _order_errors(config: ContentConfig) -> list[Error]:
    """E015: ``order`` is a number."""
    if is_order(config.order):
        return []
    # The registry sorts it as the default (100) instead: the section is not where the site meant it to be.
    return [
        Error(
            f"{type(config).__name__}.order is {config.order!r}, which is not a number.",
            hint="A number such as 10 (sections with lower numbers come first in llms.txt; the default is 100).",
            obj=type(config),
            id="agent_handshake.E015",
        )
    ]


def _follow_errors(config: ContentConfig) -> list[Error]:
    """E018: ``follow`` names relation paths from the model. A path that is not one connects nothing: the documents
    go stale on every change of what they show, which nothing else would tell."""
    name, label = type(config).__name__, config.model._meta.label
    hint = (
        "Write a tuple of lookup paths from the model to related models, as filter() names them: "
        "follow = ('author', 'category__parent')."
    )
    if isinstance(config.follow, str) or not isinstance(config.follow, (list, tuple)):
        message = f"{name}.follow is {config.follow!r}, not a tuple of lookup paths from {label}."
        return [Error(message, hint=hint, obj=type(config), id="agent_handshake.E018")]
    errors = []
    for path in config.follow:
        try:
            followed_model(config.model, path)
        except ValueError as exc:
            errors.append(
                Error(
                    f"{name}.follow names {path!r}, which is not a relation path from {label}: {exc}.",
                    hint=hint,
                    obj=type(config),
                    id="agent_handshake.E018",
                )
            )
    return errors


def _content_type_errors(config: ContentConfig) -> list[Error]:
    """E005: ``content_type`` is one registered content can have; then its required payload fields (E006)."""
    spec = get_spec(config.content_type)
    if spec is not None and spec.for_content:
        return _payload_field_errors(config, spec)
    return [
        Error(
            f"{type(config).__name__}.content_type is {config.content_type!r}, which registered content cannot use.",
            hint="Use text/answer, application/feed, application/data, media/video, media/audio, "
            "media/image, file/download, or an x-vendor/type extension.",
            obj=type(config),
            id="agent_handshake.E005",
        )
    ]


def _payload_field_errors(config: ContentConfig, spec: ContentTypeSpec) -> list[Error]:
    """E006: the inherited ``get_payload()`` builds the payload from ``payload_fields``, which must map every field
    the content type requires."""
    if type(config).get_payload is not ContentConfig.get_payload:
        return []
    missing = [key for key in spec.required if key not in config.payload_fields]
    if not missing:
        return []
    return [
        Error(
            f"{type(config).__name__} declares content type {spec.name!r} but does not map its required "
            f"payload fields: {', '.join(missing)}.",
            hint=f"Add them to payload_fields (payload key -> {config.model._meta.label} attribute), or override "
            "get_payload().",
            obj=type(config),
            id="agent_handshake.E006",
        )
    ]


def _shared_table_errors() -> list[Error]:
    """E017: registered models whose objects are the rows of one table. Documents, passages and content signals are
    keyed by the table's model (its content type), so the registrations share one document per row: each one's
    ``agent_reindex`` deleted the documents of the rows outside its own queryset, which the other had written."""
    by_table: dict[type, list[ContentConfig]] = {}
    for config in content_registry.configs():
        by_table.setdefault(config.model._meta.concrete_model, []).append(config)
    errors = []
    for table, configs in by_table.items():
        if len(configs) < 2:
            continue
        labels = " and ".join(config.model._meta.label for config in configs)
        errors.append(
            Error(
                f"{labels} are registered with agent_handshake, but their objects are the rows of one table "
                f"({table._meta.db_table}): their documents are one set, so each registration's agent_reindex "
                "deletes the documents of the other's objects, and agents lose them.",
                hint=f"Keep one registration of {table._meta.label}'s rows: the model (or one proxy of it) with a "
                "get_queryset() that selects every row agents should see; unregister() the others.",
                obj=type(configs[-1]),
                id="agent_handshake.E017",
            )
        )
    return errors
