"""Text from outside (an agent's name for itself, the capabilities it declares, its question) as operators and
people are shown it: without the characters that do not show.

A right-to-left override (U+202E) before "moc.elgoog" shows "google.com"; zero-width and tag characters hide
text; a terminal's escape sequence recolours a log. Outside the layers of ARCHITECTURE.md (like ``conf.py``), so
``identity`` and ``insights`` alike clean what they store with it.

Two format characters are part of how some words are written, and are kept where they do that: a ZERO WIDTH
NON-JOINER (U+200C) inside a Persian word ("mi" ZWNJ "khaham", "I want") or after an Indic virama, a ZERO WIDTH
JOINER (U+200D) in an Indic half form or chillu (after a virama, at a word's end too) and between the emoji of a
sequence (woman ZWJ laptop: a technologist). Anywhere else (at either end, doubled, next to a space, ASCII or a
letter of a script with case such as Latin or Cyrillic) they join nothing and only make two names look alike, and
are removed. The text is not otherwise normalised: "10⁶" stays "10⁶".
"""

from __future__ import annotations

import unicodedata

#: Character categories that do not show: a control character (Cc) that is not white space, a format character (Cf).
INVISIBLE_CATEGORIES = ("Cc", "Cf")

ZWNJ = "\u200c"
ZWJ = "\u200d"
JOINERS = (ZWNJ, ZWJ)
#: The canonical combining class of a virama (Devanagari U+094D, Malayalam U+0D4D, Sinhala U+0DCA...): a joiner
#: after one chooses a conjunct's form (UAX #31, "Layout and Format Control Characters"), even at a word's end.
VIRAMA = 9
#: Emoji skin-tone modifiers (Sk), which a ZWJ may follow in an emoji sequence; other emoji are symbols (So).
EMOJI_MODIFIERS = range(0x1F3FB, 0x1F400)


def without_invisible(text: str) -> str:
    """``text`` without control characters other than white space and without format characters, but for the
    joiners a word or an emoji sequence is written with (see the module docstring)."""
    shown = "".join(
        char
        for char in text
        if char in JOINERS or char.isspace() or unicodedata.category(char) not in INVISIBLE_CATEGORIES
    )
    # Judged among the characters that show: a zero-width space next to a joiner neither rescues it nor removes it.
    return "".join(char for index, char in enumerate(shown) if char not in JOINERS or _joins(shown, index))


def _joins(text: str, index: int) -> bool:
    """Whether the joiner at ``text[index]`` sits where it has a job: after a virama (at a word's end too), or
    between two letters or marks of a script without case (Arabic, Devanagari...), or for a ZWJ between emoji."""
    before = text[index - 1] if index else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if not before or before in JOINERS or after in JOINERS:
        return False
    if unicodedata.combining(before) == VIRAMA:
        return True
    if not after:
        return False
    base = index - 1
    # The letter or emoji the marks before the joiner sit on (the rainbow flag's variation selector U+FE0F).
    while base >= 0 and unicodedata.category(text[base]).startswith("M"):
        base -= 1
    if base < 0:
        return False
    if text[index] == ZWJ:
        return (_script(text[base]) or _emoji(text[base])) and (_script(after) or _emoji(after))
    return _script(text[base]) and _script(after)


def _script(char: str) -> bool:
    """A letter of a script without case (Lo: Arabic, Devanagari...) or a mark (a vowel sign, a virama)."""
    category = unicodedata.category(char)
    return category == "Lo" or category.startswith("M")


def _emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or ord(char) in EMOJI_MODIFIERS


def visible_name(text: str, limit: int, *, ellipsis: str = "") -> str:
    """A name someone gave itself, as shown: without invisible characters, its white space one space, at most
    ``limit`` characters; ``ellipsis`` ends it when it was cut (within the ``limit``)."""
    name = " ".join(without_invisible(text).split())
    if len(name) <= limit:
        return name
    name = name[: max(limit - len(ellipsis), 0)]
    # Cut after a joiner, the name would end with one that joins nothing.
    name = name[:-1] if name.endswith(JOINERS) and not _joins(name, len(name) - 1) else name
    return name + ellipsis if limit >= len(ellipsis) else name
