"""What a backend takes from its options setting (``ANSWER_OPTIONS``, ``EMBEDDING_OPTIONS``), declared on the backend
class as ``accepted_options``.

A backend is built with its options at the first question, search or indexing; the system check
``agent_handshake.E019`` reads the declaration so that an option the backend does not take (a typo: its constructor
would raise a TypeError) or a value it cannot use (a timeout of ``"30"``) is reported by ``manage.py check`` instead.
A backend that declares nothing is not checked, nor is a subclass with a constructor of its own: its parent's
declaration does not describe it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string


@dataclass(frozen=True)
class Option:
    """What one option's value must be.

    ``kind``: ``str``, ``int`` (a whole number) or ``float`` (any finite number, whole or not); a bool is none of
    them. ``none``: None is valid too. ``minimum`` / ``above``: the number is at least / greater than it. ``blank``:
    an empty string is valid. ``also``: the dotted path of a class whose instances are valid as well (when it can
    be imported). ``secret``: the value is never repeated in a message. ``means``: what the option is, for the
    hint."""

    kind: type
    none: bool = False
    minimum: float | None = None
    above: float | None = None
    blank: bool = True
    also: str = ""
    secret: bool = False
    means: str = ""

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.none
        if self.also and _instance_of(value, self.also):
            return True
        if self.kind is str:
            return isinstance(value, str) and (self.blank or bool(value))
        numbers = (int, float) if self.kind is float else (int,)
        if isinstance(value, bool) or not isinstance(value, numbers):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.minimum is None or value >= self.minimum) and (self.above is None or value > self.above)

    def describe(self) -> str:
        """What a valid value is: "a number > 0, or None (seconds; None: no limit)"."""
        if self.kind is str:
            text = "a string" if self.blank else "a non-empty string"
        else:
            text = "a whole number" if self.kind is int else "a number"
            if self.above is not None:
                text += f" > {self.above:g}"
            elif self.minimum is not None:
                text += f" >= {self.minimum:g}"
        if self.also:
            text += f", {article(self.also)} {self.also}"
        if self.none:
            text += ", or None"
        return f"{text} ({self.means})" if self.means else text


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeio" else "a"


def _instance_of(value: Any, path: str) -> bool:
    try:
        return isinstance(value, import_string(path))
    except ImportError:
        return False


def accepted_options(backend: type) -> dict[str, Option] | None:
    """The options ``backend`` declares it takes (``accepted_options``), or None when they are not known: it declares
    none, or it has a constructor of its own, below the class that declares them."""
    for klass in backend.__mro__:
        if "accepted_options" in vars(klass):
            declared = vars(klass)["accepted_options"]
            return declared if declared is not None and backend.__init__ is klass.__init__ else None
    return None
