"""Content signals (AHP §7) in the forms other than the manifest: the ``Content-Signal`` header and robots.txt.

Both use the Content Signals Policy vocabulary (``search``, ``ai-input``, ``ai-train`` with ``yes``/``no``),
which crawlers already read in robots.txt. ``attribution_required`` has no term there; it is published in the
manifest and in every converse response's ``meta.content_signals``.
"""

from __future__ import annotations

from collections.abc import Iterable

HEADER = "Content-Signal"
_TERMS = (("search", "search"), ("ai_input", "ai-input"), ("ai_train", "ai-train"))


def header_value(signals: dict[str, bool]) -> str:
    """``{"search": True, "ai_input": True, "ai_train": False}`` -> ``"search=yes, ai-input=yes, ai-train=no"``."""
    return ", ".join(f"{term}={'yes' if signals[key] else 'no'}" for key, term in _TERMS if key in signals)


def stricter(signals: dict[str, bool], than: dict[str, bool]) -> bool:
    """Whether ``signals`` say "no" to a term of the header that ``than`` says "yes" to: a header built from
    ``than`` would not be true of content with ``signals`` (a model with ai-input off in a file sent with the site's
    ``ai-input=yes``)."""
    return any(than.get(key, False) and not signals.get(key, False) for key, _ in _TERMS)


def robots_txt(
    signals: dict[str, bool],
    *,
    manifest_url: str,
    training_crawlers: Iterable[str],
    extra: str = "",
) -> str:
    lines = [
        "# AI agents: this site supports the Agent Handshake Protocol.",
        f"# Manifest: {manifest_url}",
        "",
    ]
    if not signals.get("ai_train", False):
        for crawler in training_crawlers:
            lines += [f"User-agent: {crawler}", "Disallow: /", ""]
    lines += ["User-agent: *", f"{HEADER}: {header_value(signals)}"]
    lines.append("Allow: /")
    if extra.strip():
        lines += ["", extra.strip()]
    return "\n".join(lines) + "\n"
