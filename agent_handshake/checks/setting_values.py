"""Each setting's value, once its type is right (E002): ranges, formats, and the values a setting may take.

Most of these values are used far from where they are set: a rate limit is parsed at the first request it counts,
a similarity threshold decides what a question is routed to, a regular expression is compiled by the middleware.
A wrong one passes every test of a development site and then fails, or quietly does nothing, in front of agents.
Each function below checks one setting (or one rule shared by a few), and :func:`value_errors` runs them in turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.core.checks import Error
from django.utils.module_loading import import_string

from ..conf import AUTHENTICATION_SCHEMES, INDEX_ON_SAVE_MODES, SETTING_NAME, app_settings

RATE = re.compile(r"^[0-9]+/(second|minute|hour|day)$")
BUDGET = re.compile(r"^[0-9]+/session$")
SIGNALS = ("ai_train", "ai_input", "search", "attribution_required")
RATE_LIMIT_TIERS = ("unauthenticated", "authenticated")

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

# Thresholds compared with a cosine similarity.
SIMILARITIES = (
    "ROUTING_MIN_SCORE",
    "ROUTING_CHOICE_MIN_SCORE",
    "ROUTING_MARGIN",
    "ROUTING_CONTENT_MARGIN",
    "ROUTING_CUE_WEIGHT",
    "SCHEMA_POOL_SIMILARITY",
    "INSIGHTS_GAP_SIMILARITY",
)

# Whole numbers (not typed in SETTING_TYPES), each with the least it may be.
WHOLE_NUMBER_MINIMUMS = (
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
)


def setting_error(name: str, problem: str, hint: str | None = None) -> Error:
    return Error(f"{SETTING_NAME}['{name}'] {problem}", hint=hint, id="agent_handshake.E002")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_authentication() -> list[Error]:
    scheme = app_settings.AUTHENTICATION
    if scheme is None or scheme in AUTHENTICATION_SCHEMES:
        return []
    return [setting_error("AUTHENTICATION", f"is {scheme!r}.", hint=f"Use one of {', '.join(AUTHENTICATION_SCHEMES)}.")]


def _check_index_on_save() -> list[Error]:
    mode = app_settings.INDEX_ON_SAVE
    if mode in INDEX_ON_SAVE_MODES:
        return []
    # Anything else would silently index nothing on save.
    hint = f"Use one of {', '.join(repr(choice) for choice in INDEX_ON_SAVE_MODES)}."
    return [setting_error("INDEX_ON_SAVE", f"is {mode!r}.", hint=hint)]


def _check_rate_limits() -> list[Error]:
    errors = []
    for tier, limits in app_settings.RATE_LIMITS.items():
        errors += _rate_limit_tier_errors(tier, limits)
    return errors


def _rate_limit_tier_errors(tier: Any, limits: Any) -> list[Error]:
    if tier not in RATE_LIMIT_TIERS or not isinstance(limits, dict):
        hint = 'Tiers are "unauthenticated" and "authenticated", each a dict.'
        return [setting_error("RATE_LIMITS", f"has an invalid tier {tier!r}.", hint=hint)]
    errors = []
    requests, budget = limits.get("requests"), limits.get("token_budget")
    if requests is not None and not (isinstance(requests, str) and RATE.match(requests)):
        errors.append(
            setting_error("RATE_LIMITS", f"[{tier!r}]['requests'] is {requests!r}.", hint='e.g. "30/minute".')
        )
    if budget is not None and not (isinstance(budget, str) and BUDGET.match(budget)):
        errors.append(
            setting_error("RATE_LIMITS", f"[{tier!r}]['token_budget'] is {budget!r}.", hint='e.g. "5000/session".')
        )
    return errors


def _check_markdown_suffix() -> list[Error]:
    suffix = app_settings.MARKDOWN_SUFFIX
    if suffix and not any(char in "/?#" or char.isspace() for char in suffix):
        return []
    # "" ends every URL: every page would be answered with the markdown of the "/" document; a path never holds a
    # "?" or "#" (they begin the query string and the fragment), so no URL would end with such a one.
    hint = 'A suffix such as ".md", with no "/", "?", "#" or spaces.'
    return [setting_error("MARKDOWN_SUFFIX", f"is {suffix!r}.", hint=hint)]


def _check_agent_and_action_rates() -> list[Error]:
    errors = []
    for name in ("AGENT_RATE_LIMIT", "ACTION_RATE_LIMIT"):
        rate = getattr(app_settings, name)
        if rate and not RATE.match(rate):
            hint = '"N/second", "N/minute", "N/hour" or "N/day"; "" for no limit.'
            errors.append(setting_error(name, f"is {rate!r}.", hint=hint))
    return errors


def _check_did_network_rate_limit() -> list[Error]:
    ceiling = app_settings.DID_NETWORK_RATE_LIMIT
    tiers = {*RATE_LIMIT_TIERS, *app_settings.RATE_LIMITS}
    if ceiling is None or (isinstance(ceiling, str) and (RATE.match(ceiling) or ceiling in tiers)):
        return []
    hint = 'A RATE_LIMITS tier ("authenticated"), a rate such as "300/minute", or None for no ceiling.'
    return [setting_error("DID_NETWORK_RATE_LIMIT", f"is {ceiling!r}.", hint=hint)]


def _check_trusted_proxy_count() -> list[Error]:
    count = app_settings.TRUSTED_PROXY_COUNT
    if count >= 0:
        return []
    hint = "The number of reverse proxies in front of the site: 0 (none: REMOTE_ADDR) or more."
    return [setting_error("TRUSTED_PROXY_COUNT", f"is {count!r}.", hint=hint)]


def _check_client_ip_function() -> list[Error]:
    path = app_settings.merged["CLIENT_IP_FUNCTION"]
    if not path:
        return []
    hint = 'A dotted path to a function(request) -> IP address string, e.g. "mysite.net.client_ip"; "" for none.'
    try:
        function = import_string(path)
    except ImportError as exc:
        return [setting_error("CLIENT_IP_FUNCTION", f"{path!r} cannot be imported: {exc}", hint=hint)]
    if not callable(function):
        return [setting_error("CLIENT_IP_FUNCTION", f"{path!r} is not callable.", hint=hint)]
    return []


def _check_default_content_signals() -> list[Error]:
    signals = app_settings.DEFAULT_CONTENT_SIGNALS
    bad = [key for key in signals if key not in SIGNALS or not isinstance(signals[key], bool)]
    if not bad:
        return []
    return [
        setting_error(
            "DEFAULT_CONTENT_SIGNALS",
            f"has unknown or non-boolean entries: {', '.join(map(str, bad))}.",
            hint=f"Keys are {', '.join(SIGNALS)}; values True or False.",
        )
    ]


def _check_exempt_paths() -> list[Error]:
    errors = []
    for pattern in app_settings.EXEMPT_PATHS:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            errors.append(setting_error("EXEMPT_PATHS", f"has an invalid regular expression {pattern!r}: {exc}"))
    return errors


def _check_at_least_one() -> list[Error]:
    return [
        setting_error(name, f"is {getattr(app_settings, name)!r}; it must be at least 1.")
        for name in AT_LEAST_ONE
        if getattr(app_settings, name) < 1
    ]


def _check_pgvector_candidates() -> list[Error]:
    # pgvector's hnsw.ef_search takes at most 1000: every search would fail.
    return [
        setting_error(name, f"is {getattr(app_settings, name)!r}; pgvector allows at most 1000.")
        for name in ("RETRIEVAL_CANDIDATES", "HNSW_EF_SEARCH")
        if getattr(app_settings, name) > 1000
    ]


def _check_max_term_share() -> list[Error]:
    share = app_settings.MAX_TERM_SHARE
    if 0 < share <= 1:
        return []
    return [setting_error("MAX_TERM_SHARE", f"is {share!r}.", hint="A share: 0 < share <= 1.")]


def _check_bm25_parameters() -> list[Error]:
    if app_settings.BM25_K1 < 0:
        name = "BM25_K1"
    elif not 0 <= app_settings.BM25_B <= 1:
        name = "BM25_B"
    else:
        return []
    hint = "BM25: k1 >= 0 (term-frequency saturation), 0 <= b <= 1 (length normalisation)."
    return [setting_error(name, f"is {getattr(app_settings, name)!r}.", hint=hint)]


def _check_bm25_field_weights() -> list[Error]:
    weights = app_settings.BM25_FIELD_WEIGHTS
    known_fields = not set(weights) - {"title", "heading", "text"}
    if known_fields and all(_is_number(value) and value >= 0 for value in weights.values()):
        return []
    hint = 'Keys "title", "heading" and "text"; values numbers >= 0 (an occurrence in the text weighs 1).'
    return [setting_error("BM25_FIELD_WEIGHTS", f"is {weights!r}.", hint=hint)]


def _check_relevance_floor() -> list[Error]:
    floor = app_settings.RELEVANCE_FLOOR
    if floor is None or 0 <= floor < 1:
        return []
    hint = "A cosine similarity, 0 <= floor < 1 (0: off), or None for the embedding model's own."
    return [setting_error("RELEVANCE_FLOOR", f"is {floor!r}.", hint=hint)]


def _check_intent_seconds() -> list[Error]:
    errors = []
    for name in ("INTENT_MAX_SKEW", "INTENT_RETENTION_SECONDS"):
        value = getattr(app_settings, name)
        if not _is_whole_number(value) or value < 1:
            errors.append(setting_error(name, f"is {value!r}.", hint="Seconds, >= 1."))
    return errors


def _check_similarities() -> list[Error]:
    errors = []
    for name in SIMILARITIES:
        value = getattr(app_settings, name)
        if not _is_number(value) or not -1 <= value <= 1:
            errors.append(setting_error(name, f"is {value!r}.", hint="A cosine similarity, between -1 and 1."))
    return errors


def _check_trust_tiers() -> list[Error]:
    tiers = app_settings.DID_TRUST_TIERS
    hint = (
        'A list of {"name": str, "min_trust": 0..1, "rate_limits": "authenticated" or "unauthenticated", '
        '"scopes": [str]}.'
    )
    if not isinstance(tiers, (list, tuple)) or not tiers:
        return [setting_error("DID_TRUST_TIERS", f"is {tiers!r}.", hint=hint)]
    for tier in tiers:
        if not _is_trust_tier(tier):
            return [setting_error("DID_TRUST_TIERS", f"has a bad tier: {tier!r}.", hint=hint)]
    return []


def _is_trust_tier(tier: Any) -> bool:
    return (
        isinstance(tier, dict)
        and isinstance(tier.get("name"), str)
        and _is_number(tier.get("min_trust"))
        and 0 <= tier["min_trust"] <= 1
        and tier.get("rate_limits", "authenticated") in RATE_LIMIT_TIERS
        and isinstance(tier.get("scopes", []), (list, tuple))
        and all(isinstance(scope, str) for scope in tier.get("scopes", []))
    )


def _check_whole_number_minimums() -> list[Error]:
    errors = []
    for name, least in WHOLE_NUMBER_MINIMUMS:
        value = getattr(app_settings, name)
        if not _is_whole_number(value) or value < least:
            errors.append(setting_error(name, f"is {value!r}.", hint=f"A whole number, >= {least}."))
    return errors


def _check_trust_history_days() -> list[Error]:
    history = app_settings.DID_TRUST_HISTORY_DAYS
    if history is None or (_is_whole_number(history) and history >= 1):
        return []
    return [setting_error("DID_TRUST_HISTORY_DAYS", f"is {history!r}.", hint="Days, >= 1, or None to keep all.")]


def _check_insights_switches() -> list[Error]:
    return [
        setting_error(name, f"is {getattr(app_settings, name)!r}.", hint="True or False.")
        for name in ("INSIGHTS_ENABLED", "INSIGHTS_RECORD_QUESTIONS")
        if not isinstance(getattr(app_settings, name), bool)
    ]


def _check_insights_flush_seconds() -> list[Error]:
    flush = app_settings.INSIGHTS_FLUSH_SECONDS
    if not _is_number(flush) or flush < 0:
        return [setting_error("INSIGHTS_FLUSH_SECONDS", f"is {flush!r}.", hint="Seconds, >= 0 (0: no writer thread).")]
    return []


def _check_intent_ui_scopes() -> list[Error]:
    scopes = app_settings.INTENT_UI_SCOPES
    if isinstance(scopes, (list, tuple)) and all(isinstance(scope, str) for scope in scopes):
        return []
    return [setting_error("INTENT_UI_SCOPES", f"is {scopes!r}.", hint='A list of scopes: ["orders"].')]


def _check_site_key_settings() -> list[Error]:
    return [
        setting_error(name, "is not a string.", hint="PEM text or base64url; a file path.")
        for name in ("SITE_PRIVATE_KEY", "SITE_KEY_FILE")
        if not isinstance(getattr(app_settings, name), str)
    ]


def _check_base_url() -> list[Error]:
    url = app_settings.BASE_URL
    if not url or re.match(r"^https?://[^/]+/?$", url):
        return []
    return [setting_error("BASE_URL", f"is {url!r}.", hint='Scheme and host: "https://example.com".')]


def _check_callback_allowed_ports() -> list[Error]:
    ports = app_settings.CALLBACK_ALLOWED_PORTS
    if _valid_callback_ports(ports):
        return []
    # An empty list would refuse every callback URL; a port given as a string would never match.
    hint = '"auto" (443 for https, 80 for http), port numbers 1-65535 like [443, 8443], or None for any port.'
    return [setting_error("CALLBACK_ALLOWED_PORTS", f"is {ports!r}.", hint=hint)]


def _valid_callback_ports(ports: Any) -> bool:
    if ports is None or ports == "auto":
        return True
    return (
        isinstance(ports, (list, tuple))
        and bool(ports)
        and all(_is_whole_number(port) and 1 <= port <= 65535 for port in ports)
    )


#: Every value check, in the order their errors are reported.
VALUE_CHECKS: tuple[Callable[[], list[Error]], ...] = (
    _check_authentication,
    _check_index_on_save,
    _check_rate_limits,
    _check_markdown_suffix,
    _check_agent_and_action_rates,
    _check_did_network_rate_limit,
    _check_trusted_proxy_count,
    _check_client_ip_function,
    _check_default_content_signals,
    _check_exempt_paths,
    _check_at_least_one,
    _check_pgvector_candidates,
    _check_max_term_share,
    _check_bm25_parameters,
    _check_bm25_field_weights,
    _check_relevance_floor,
    _check_intent_seconds,
    _check_similarities,
    _check_trust_tiers,
    _check_whole_number_minimums,
    _check_trust_history_days,
    _check_insights_switches,
    _check_insights_flush_seconds,
    _check_intent_ui_scopes,
    _check_site_key_settings,
    _check_base_url,
    _check_callback_allowed_ports,
)


def value_errors() -> list[Error]:
    """E002 for each value that is out of range or malformed; the types must have been checked first."""
    return [error for check in VALUE_CHECKS for error in check()]
