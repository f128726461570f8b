"""What agents may see and do: the content registry and the capability registry.

Site admins, not model authors, decide what agents see. They register models in an ``agents.py`` module of
any installed app (autodiscovered at start-up, like ``admin.py``)::

    import agent_handshake
    from blog.models import Post

    @agent_handshake.register(Post)
    class PostContent(agent_handshake.ContentConfig):
        title_field = "title"
        body_field = "body"

Capabilities (what the concierge can do) live in one registry that every protocol reads: the AHP manifest
today, and the converse endpoint, NLWeb, IntentWeb, MCP and OpenAPI bindings as they are added.
Mistakes (a model registered twice, a field that does not exist, a content type without its required
fields) are reported by ``manage.py check``; see :mod:`agent_handshake.checks`.
"""

from __future__ import annotations

import datetime
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db.models.constants import LOOKUP_SEP
from django.utils.functional import Promise
from django.utils.text import capfirst

from .content_types import get_spec
from .signals import model_registered, model_unregistered, registry_changed

if TYPE_CHECKING:
    from django.db.models import Field, ForeignObjectRel, Model, QuerySet


class NotRegistered(LookupError):
    pass


class ContentConfig:
    """How one registered model is shown to agents. Subclass it and override what differs.

    The ``*_field`` attributes name a model field, property or method (called with no arguments); the
    ``get_*`` methods read them and can be overridden for anything more involved.
    """

    #: AHP content type of the items (Appendix C): "text/answer", "application/feed", "media/video", ...
    content_type: str = "text/answer"
    #: schema.org type of the items, e.g. "BlogPosting", "VideoObject", "Product".
    schema_type: str = "CreativeWork"
    title_field: str | None = None
    body_field: str | None = None
    summary_field: str | None = None
    published_field: str | None = None
    #: Payload key of the content type -> attribute of the model, e.g. {"stream_url": "stream_url"}.
    payload_fields: dict[str, str] = {}
    #: Heading of the model's section in llms.txt (default: the model's verbose_name_plural).
    section: str | None = None
    #: One line under that heading.
    section_description: str = ""
    #: Position of the section in llms.txt; lower comes first.
    order: int = 100
    #: Whether these objects describe the site itself (about, contact, policies): the ``site_info`` capability
    #: answers from them.
    site_info: bool = False
    #: Name and description of the model's own MODE2 capability, offered when its content type is richer than
    #: text (default ``get_<model_name>``).
    capability_name: str | None = None
    capability_description: str | None = None
    #: Lookup paths from the model to related models its documents show, e.g. ``("author", "category__parent")``:
    #: a save or delete of such an object re-indexes the objects that reach it (``manage.py check`` names a path
    #: that is not a relation path, E018). Without it, only the model's own saves and many-to-many changes do.
    follow: tuple[str, ...] = ()

    def __init__(self, model: type[Model]) -> None:
        self.model = model

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for {self.model._meta.label}>"

    @property
    def label(self) -> str:
        """The label its documents, passages and content signals are stored under ("blog.post"): the model's, or
        for a proxy the model it proxies, whose table and content type the proxy's objects share."""
        return self.model._meta.concrete_model._meta.label_lower

    def get_section(self) -> str:
        return self.section or capfirst(str(self.model._meta.verbose_name_plural))

    def get_capability_name(self) -> str:
        """The name of the model's own MODE2 capability (when its content type is richer than text)."""
        return self.capability_name or f"get_{self.model._meta.model_name}"

    def get_queryset(self) -> QuerySet:
        """The objects agents may see (e.g. only published ones)."""
        return self.model._default_manager.all()

    def read(self, obj: Model, attribute: str | None) -> Any:
        """The value of a field, property or zero-argument method of ``obj``."""
        if not attribute:
            return None
        value = getattr(obj, attribute)
        return value() if callable(value) else value

    def get_title(self, obj: Model) -> str:
        return str(self.read(obj, self.title_field) if self.title_field else obj)

    def get_url(self, obj: Model) -> str:
        return obj.get_absolute_url()

    def get_summary(self, obj: Model) -> str:
        return str(self.read(obj, self.summary_field) or "") if self.summary_field else ""

    def get_markdown(self, obj: Model) -> str:
        """The object's body as markdown (without the title, which is added around it)."""
        return str(self.read(obj, self.body_field) or "") if self.body_field else ""

    def get_published_at(self, obj: Model) -> datetime.datetime | datetime.date | None:
        return self.read(obj, self.published_field) if self.published_field else None

    def get_schema_type(self, obj: Model) -> str:
        return self.schema_type

    def get_payload(self, obj: Model) -> dict[str, Any]:
        """The content type's payload (Appendix C) for ``obj``; empty for ``text/answer``."""
        spec = get_spec(self.content_type)
        if spec is None or not self.payload_fields:
            return {}
        values = {key: self.read(obj, attribute) for key, attribute in self.payload_fields.items()}
        return spec.build(values)


def followed_model(model: type[Model], path: str) -> type[Model]:
    """The model that the lookup path ``path`` (``"category__parent"``) leads to from ``model``, through forward
    or reverse relations as ``filter()`` names them. Raises ValueError saying why when it is not such a path."""
    return followed_relation(model, path).related_model


def followed_relation(model: type[Model], path: str) -> Field | ForeignObjectRel:
    """The last relation of the lookup path ``path`` from ``model`` (see :func:`followed_model`)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"{path!r} is not a lookup path such as 'author' or 'category__parent'")
    current, relation = model, None
    for part in path.split(LOOKUP_SEP):
        try:
            relation = current._meta.get_field(part)
        except FieldDoesNotExist:
            raise ValueError(f"{current._meta.label} has no field or relation {part!r}") from None
        if not relation.is_relation or not isinstance(relation.related_model, type):
            # A plain field, or a generic foreign key, whose related model differs from row to row.
            raise ValueError(f"{current._meta.label}.{part} is not a relation to one model")
        current = relation.related_model
    return relation


def is_order(value: object) -> bool:
    """Whether ``value`` can be a ``ContentConfig.order``: a number (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _sort_order(config: ContentConfig) -> numbers.Real:
    """``config.order``, or the default when it is not a number: like the config's other options, a bad one is
    named by ``manage.py check`` (E015), and sorting by it would fail at start-up and on every llms.txt request."""
    return config.order if is_order(config.order) else ContentConfig.order


class ContentRegistry:
    """Models whose objects agents may see, each with its :class:`ContentConfig`."""

    def __init__(self) -> None:
        self._configs: dict[type[Model], ContentConfig] = {}
        #: Second registrations of a model, kept for the system check (the first one stays in force).
        self.duplicates: list[tuple[type[Model], type[ContentConfig]]] = []

    def register(
        self, model: type[Model], config_class: type[ContentConfig] | None = None
    ) -> Callable[[type[ContentConfig]], type[ContentConfig]] | type[ContentConfig]:
        """Register ``model``; with no config class, return a class decorator."""
        if config_class is None:

            def decorator(cls: type[ContentConfig]) -> type[ContentConfig]:
                self.register(model, cls)
                return cls

            return decorator
        if not (isinstance(config_class, type) and issubclass(config_class, ContentConfig)):
            raise ImproperlyConfigured(
                f"agent_handshake.register({model.__name__}, ...) needs a ContentConfig subclass, got {config_class!r}."
            )
        if model._meta.abstract:
            raise ImproperlyConfigured(f"The model {model.__name__} is abstract, so it cannot be registered.")
        if model in self._configs:
            self.duplicates.append((model, config_class))
        else:
            self._configs[model] = config_class(model)
            if apps.models_ready:
                # Whenever it is registered (an agents module, an app's ready() that runs after ours, a test), the
                # receivers of this signal connect its save and delete receivers and register its generated
                # capability, as AppConfig.ready() does for those registered before that: the registry is below the
                # layers that index and answer, so it tells them rather than calling them.
                model_registered.send(sender=model, config=self._configs[model])
            registry_changed.send(sender=self)
        return config_class

    def unregister(self, model: type[Model]) -> None:
        if model not in self._configs:
            raise NotRegistered(f"The model {model.__name__} is not registered.")
        config = self._configs.pop(model)
        self.duplicates = [(m, c) for m, c in self.duplicates if m is not model]
        model_unregistered.send(sender=model, config=config)
        registry_changed.send(sender=self)

    def is_registered(self, model: type[Model]) -> bool:
        return model in self._configs

    def get_config(self, model: type[Model]) -> ContentConfig:
        try:
            return self._configs[model]
        except KeyError:
            raise NotRegistered(f"The model {model.__name__} is not registered.") from None

    def get_config_by_label(self, label: str) -> ContentConfig:
        """The config of the model labelled ``label`` as Django labels it ("blog.Post" or "blog.post"; an app label
        keeps its case: "MyApp.note"), or in another case ("myapp.note") when no other app's label differs only so."""
        wanted = label_lower(label)
        # Its own label first, then the label it is stored under: a registered proxy ("blog.publishedpost") is
        # also found by its model's ("blog.post"), which its documents and passages carry.
        for label_of in (lambda config: config.model._meta.label_lower, lambda config: config.label):
            matches = [config for config in self._configs.values() if label_of(config).lower() == wanted.lower()]
            for config in matches:
                if label_of(config) == wanted or len(matches) == 1:
                    return config
        raise NotRegistered(f"No registered model is labelled {label!r}.")

    def __iter__(self) -> Iterator[ContentConfig]:
        return iter(sorted(self._configs.values(), key=lambda c: (_sort_order(c), c.get_section())))

    def __len__(self) -> int:
        return len(self._configs)

    def configs(self) -> list[ContentConfig]:
        """The configs in registration order, unsorted: what the system checks read, whatever their ``order``."""
        return list(self._configs.values())

    def models(self) -> list[type[Model]]:
        return [config.model for config in self]


#: The AHP version the registries are published as (the manifest's ``ahp``, MCP's ``serverInfo.ahp``...).
AHP_VERSION = "0.1"
#: The MCP revisions the MCP front door answers, oldest first, and the OpenAPI version of /openapi.json: the
#: manifest's ``integrations`` names them.
MCP_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
OPENAPI_VERSION = "3.1.0"
#: IntentWeb: the protocol_version we speak and the attribution profile we sign and verify with (intentweb.attribution).
INTENTWEB_VERSION = "1.0"
INTENTWEB_ATTRIBUTION_PROFILE = "ahp-intentweb-ed25519-jcs-v1"
#: The draft the schema templates front door implements (agent.json's integrations.schema_templates).
SCHEMA_TEMPLATES_SPEC = "draft-zhou-structured-data-schema-interaction-00"
MODES = ("MODE1", "MODE2", "MODE3")
ACTION_TYPES = ("query", "action", "async")


def label_lower(label: str) -> str:
    """A model's label ("blog.Post") as ``Model._meta.label_lower`` writes it: the model name is not case
    sensitive (as for ``apps.get_model``), the app label is."""
    app_label, _, model_name = label.rpartition(".")
    return f"{app_label}.{model_name.lower()}"


def stored_label(label: str) -> str:
    """The label the documents of the model labelled ``label`` are stored under (:attr:`ContentConfig.label`): a
    proxy's ("blog.PublishedPost") is its concrete model's ("blog.post"). A label of no model is kept, as
    :func:`label_lower` writes it, for the system checks to name."""
    wanted = label_lower(label)
    for config in content_registry.configs():
        if config.model._meta.label_lower == wanted:
            return config.label
    if apps.models_ready:
        try:
            return apps.get_model(wanted)._meta.concrete_model._meta.label_lower
        except (LookupError, ValueError):
            pass
    return wanted


def _plain(value: Any) -> Any:
    """``value`` with every lazy string in it (``gettext_lazy``), however deep in dicts, lists and tuples, a str."""
    if isinstance(value, Promise):
        return str(value)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    return value


@dataclass
class Capability:
    """A named function of the concierge, declared once and published by every protocol binding.

    ``available`` decides, each time the manifest is built, whether the capability is offered (e.g. a
    contact capability only once the site profile has contact details).
    """

    name: str
    description: str
    mode: str = "MODE2"
    response_types: list[str] = field(default_factory=lambda: ["text/answer"])
    accept_fallback: bool = False
    action_type: str | None = None
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    #: Authentication scope required to invoke it; None for public capabilities.
    scope: str | None = None
    #: Its own rate limit in "N/period" form; None to use the mode's default.
    rate_limit: str | None = None
    #: Registered model labels ("blog.post") a content capability retrieves from; empty for all of them.
    models: tuple[str, ...] = ()
    #: Whether the concierge may answer an ambiguous query with a clarification question (§6.3).
    clarify: bool = False
    #: MODE3: how a free-text query maps to ``input_schema`` fields, on top of what the schema itself allows
    #: (``enum`` values, ``pattern``s, dates, emails): a callable ``query -> {field: value}``.
    extract: Callable[[str], dict[str, Any]] | None = field(default=None, repr=False)
    #: MODE3 ``async``: the ``eta_seconds`` announced on acceptance (None: the JOB_ETA_SECONDS setting).
    eta_seconds: int | None = None
    #: MODE2: ``handler(ConverseContext) -> Reply | Clarification``. MODE3: ``handler(Invocation) -> Outcome``
    #: (or ``Deferred`` for an async job that something else completes, like the human desk).
    handler: Callable[..., Any] | None = field(default=None, repr=False)
    available: Callable[[], bool] | None = field(default=None, repr=False)
    #: MODE3: the content it acts on, as {model label: object -> prefilled input}: an answer listing such an
    #: object offers the capability as one of the object's actions (NLWeb ``actions[]``), its input filled in.
    applies_to: dict[str, Callable[[Any], dict[str, Any]]] = field(default_factory=dict, repr=False)
    #: The schema.org Action type an action of this capability is (None: CheckAction for a query, else Action).
    action_schema_type: str | None = None
    #: What a person would say they want, in a few words ("Book a tasting"); empty: the description's first
    #: sentence. IntentWeb publishes it as the capability's ``intent``; routing reads it with the examples.
    intent: str = ""
    #: Things an agent or a person might say to ask for it (IntentWeb ``examples``; routing).
    examples: tuple[str, ...] = ()
    #: Business rules and limits, in natural language (IntentWeb ``constraints``).
    constraints: tuple[str, ...] = ()
    #: Anything else an agent should know (IntentWeb ``notes``).
    notes: tuple[str, ...] = ()
    #: MODE3: the output field that names what was created or found (a booking reference, an order number):
    #: IntentWeb's ``external_id``. None: the first of ``reference``, ``order_number``, ``id`` the output has.
    external_id: str | None = None

    def __post_init__(self) -> None:
        # Texts written with gettext_lazy, read now (in LANGUAGE_CODE, or the language active at registration): the
        # documents agents read (manifests, tool lists, the routing vectors) are built once for every visitor, and
        # JSON, YAML and the router take strings.
        for name in ("description", "intent", "examples", "constraints", "notes", "input_schema", "output_schema"):
            setattr(self, name, _plain(getattr(self, name)))
        # Model labels as the index stores them: "blog.Post" (Django's label) and "blog.post" are one model, and a
        # proxy's objects are its model's.
        self.models = tuple(stored_label(label) for label in self.models)
        self.applies_to = {stored_label(label): prefill for label, prefill in self.applies_to.items()}
        if self.action_type in ("action", "async") and self.scope is None:
            self.scope = self.name  # side effects always need credentials; the scope defaults to the name

    @property
    def intent_text(self) -> str:
        """:attr:`intent`, or the description's first sentence."""
        if self.intent:
            return self.intent
        first = self.description.split(". ")[0].strip()
        return first.rstrip(".") or self.name.replace("_", " ")

    @property
    def requires_auth(self) -> bool:
        """``action``/``async`` capabilities always do (§5.3); others when they declare a scope."""
        return self.action_type in ("action", "async") or self.scope is not None

    def is_available(self) -> bool:
        return self.available() if self.available else True

    def manifest_entry(self) -> dict[str, Any]:
        """The capability as the AHP manifest lists it (§4.3, §5.3)."""
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "mode": self.mode,
            "response_types": list(self.response_types),
        }
        if self.accept_fallback:
            entry["accept_fallback"] = True
        if self.action_type:
            entry["action_type"] = self.action_type
        if self.input_schema is not None:
            entry["input_schema"] = self.input_schema
        if self.output_schema is not None:
            entry["output_schema"] = self.output_schema
        if self.requires_auth:
            entry["auth_required"] = True  # the spec's newer text; the published 0.1 schema lacks it (NOTES.md)
        return entry


class CapabilityRegistry:
    """Every capability the site offers, in registration order."""

    def __init__(self) -> None:
        self._capabilities: dict[str, Capability] = {}
        self.duplicates: list[Capability] = []
        #: Those the app registered itself (:mod:`.concierge.capabilities`), told apart from a site's capability of
        #: the same name, which is kept instead of one (check W007).
        self.builtin: list[Capability] = []

    def register(self, capability: Capability) -> Capability:
        if capability.name in self._capabilities:
            self.duplicates.append(capability)
        else:
            self._capabilities[capability.name] = capability
            registry_changed.send(sender=self)
        return capability

    def replace(self, capability: Capability) -> Capability:
        """Put ``capability`` in the place of the registered one of its name, where the documents list it."""
        if capability.name not in self._capabilities:
            raise NotRegistered(f"No capability is named {capability.name!r}.")
        self._capabilities[capability.name] = capability
        registry_changed.send(sender=self)
        return capability

    def unregister(self, name: str) -> None:
        if name not in self._capabilities:
            raise NotRegistered(f"No capability is named {name!r}.")
        del self._capabilities[name]
        registry_changed.send(sender=self)

    def get(self, name: str) -> Capability | None:
        return self._capabilities.get(name)

    def __iter__(self) -> Iterator[Capability]:
        return iter(list(self._capabilities.values()))

    def available(self) -> list[Capability]:
        return [capability for capability in self if capability.is_available()]


content_registry = ContentRegistry()
capability_registry = CapabilityRegistry()
