"""Text from outside (an agent's name for itself, the capabilities it declares, its question) as operators and
people are shown it: without the characters that do not show.

A right-to-left override (U+202E) before "moc.elgoog" shows "google.com"; zero-width and tag characters hide
text; a terminal's escape sequence recolours a log. Outside the layers of ARCHITECTURE.md (like ``conf.py``), so
``identity`` and ``insights`` alike clean what they store with it.
"""

from __future__ import annotations

import unicodedata

#: Character categories that do not show: a control character (Cc) that is not white space, a format character (Cf).
INVISIBLE_CATEGORIES = ("Cc", "Cf")


def without_invisible(text: str) -> str:
    """``text`` without control characters other than white space and without format characters."""
    return "".join(char for char in text if char.isspace() or unicodedata.category(char) not in INVISIBLE_CATEGORIES)


def visible_name(text: str, limit: int) -> str:
    """A name someone gave itself, as shown: without invisible characters, its white space one space, at most
    ``limit`` characters."""
    return " ".join(without_invisible(text).split())[:limit]
