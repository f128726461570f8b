"""The answer to a clarification's "which one?": which of the options it chooses (:func:`choose`).

An answer names its choice by number ("2", "the second"), by name or intent, or chooses it in words that fit it
clearly among the candidates only (by :func:`~.decision.route_ranked`'s rule) and fit it at least
``ROUTING_CHOICE_MIN_SCORE``, which words unrelated to every option do not reach; an answer that chooses none of
them (a number past the list, another capability's name, words that fit none clearly) is an unknown capability,
and the question stays open.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...conf import app_settings
from ...registry import Capability, capability_registry
from .decision import route_ranked
from .scoring import rank

ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
}


def number_named(answer: str) -> int | None:
    """The number (from 1) an answer to "which one?" is ("2", "the second", "option 2"), whatever the list's
    length, or None when it is not a number."""
    # No "-" before it ("-1" is no place on a list), and "the one" is none ("the first one", "option one" are).
    number = re.fullmatch(
        r"[^\w-]*(?P<the>the\s+)?(?P<kind>(?:option|number)\s+)?(?P<word>\d+|[a-z]+)(?:st|nd|rd|th)?\W*(?:one)?\W*",
        answer.lower(),
    )
    if number is None or (number["word"] == "one" and number["the"] and not number["kind"]):
        return None
    word = number["word"]
    return int(word) if word.isdigit() else ORDINALS.get(word)


def numbered(answer: str, count: int) -> int | None:
    """The index (from 0) of the option among ``count`` that ``answer`` names by number ("2", "the second"), or
    None."""
    number = number_named(answer)
    return number - 1 if number is not None and 1 <= number <= count else None


def choose(answer: str, candidates: Sequence[Capability]) -> Capability | None:
    """The candidate an answer to "which one?" chooses: by its number on the list, by its name or intent, or in
    words that fit it clearly among the candidates alone (``ROUTING_MARGIN``, as :func:`~.decision.route_ranked` has
    it) and fit it at least ``ROUTING_CHOICE_MIN_SCORE``. None when it chooses none of them: a number past the list,
    the name of a capability not on it, words that fit none clearly. (Ranked whatever they were, "4" of three options
    would choose the second, "content_search" one of the others, "neither" the best of them.)

    Words that name no option have a floor of their own, above ``ROUTING_MIN_SCORE``: a request is weighed against
    every capability and the site's content, an answer only among the few options, and MiniLM gives any short text
    a cosine of about 0.2 with any other, so the best of two or three options clears 0.2 for words that mean none
    of them ("teleport" would choose escalate_to_human, "yes" check_inventory). The floor lies between what
    unrelated answers and answers meaning an option score on the demo's capabilities (the figures are in
    ``bench/README.md``): a few short answers meaning an option fall below it and ask again. An answer that chooses
    nothing only keeps the question open; one that chooses wrongly runs a capability, or answers 401."""
    if not candidates:
        return None
    number = number_named(answer)
    if number is not None:
        return candidates[number - 1] if 1 <= number <= len(candidates) else None
    lowered = answer.lower()
    named = [
        capability
        for capability in candidates
        if capability.name in lowered or capability.intent_text.lower() in lowered
    ]
    if len(named) == 1:
        return named[0]
    if not named and lowered.strip(" \t\r\n.!'\"`") in {capability.name for capability in capability_registry}:
        return None  # another capability, by its name alone
    ranked = rank(answer, named or candidates)
    if not named and (not ranked or ranked[0].score < app_settings.ROUTING_CHOICE_MIN_SCORE):
        return None  # words that fit every option no better than words unrelated to them do
    return route_ranked(ranked).chosen
