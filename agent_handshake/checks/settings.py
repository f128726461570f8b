"""The ``AGENT_HANDSHAKE`` dict itself (E001), its keys (W001) and the type of each value (E002).

Settings are read lazily, at the first request that needs one, so a wrong type would otherwise surface as a 500 in
front of an agent. The checks of each value's range and form (:mod:`.setting_values`) run only once every type is
right, since they compare and parse the values.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from ..conf import DEFAULTS, SETTING_NAME
from .setting_values import setting_error, value_errors

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
    "READER_MODEL_DIR": str,
    "READER_MIN_SCORE": (int, float),
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

# The types a boolean would pass as (bool is an int) though a number is meant.
NUMBER_TYPES = (int, (int, float), (int, type(None)))


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
    errors: list[Any] = [*_unknown_key_warnings(user), *_type_errors(user)]
    # The value checks assume the types are right; an unknown key (a warning) must not skip them.
    if not any(isinstance(message, Error) for message in errors):
        errors += value_errors()
    return errors


def _unknown_key_warnings(user: dict) -> list[Warning]:
    return [
        Warning(
            f"{SETTING_NAME} has an unknown key {key!r}; it is ignored.",
            hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
            id="agent_handshake.W001",
        )
        for key in sorted(set(user) - set(DEFAULTS))
    ]


def _type_errors(user: dict) -> list[Error]:
    errors = []
    for name, expected in SETTING_TYPES.items():
        error = _type_error(name, expected, user.get(name, DEFAULTS[name]))
        if error is not None:
            errors.append(error)
    return errors


def _type_error(name: str, expected: type | tuple[type, ...], value: Any) -> Error | None:
    if isinstance(value, bool) and expected in NUMBER_TYPES:
        return setting_error(name, "must be a number, not a boolean.")
    if not isinstance(value, expected):
        names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
        return setting_error(name, f"must be {names}, not {type(value).__name__}.")
    return None
