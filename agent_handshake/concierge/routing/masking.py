"""The names routing leaves out of a request and of the capabilities' texts before anything is embedded.

The site's own name (:func:`name_pattern`, :func:`without_site_name`) counts for no capability: every request talks
to the site (the about question and the wish to reach a person alike), and a capability text that names it (an
escalation "to a person at Lantern & Kettle") draws every such request. It is replaced by "you" only when it is
distinctive, when one of its words is not a word the capabilities' texts use: a site called "Tea" is left in "Do
you sell tea?".

The names of the objects of actions (:func:`object_names`, :func:`without_object_names`: the titles of the
documents the actions act on, a shop's products) are replaced by "it": the object of a request is no evidence for
which action is asked, and a routing example naming a product would otherwise draw every request about that
product.

:func:`routed_texts` and :func:`unnamed` are the capabilities' texts and a request as they are routed, both without
either kind of name.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.contenttypes.models import ContentType

from ... import state
from ...models import Document
from ...registry import Capability, capability_registry, content_registry
from ..extractive import STOPWORDS, unaccented
from .cue_words import CUE_PREFIX, words
from .texts import declared_texts, texts_of

#: Words of a site's name that tell nothing about which site it is (words under 3 letters never count either).
NAME_STOPWORDS = frozenset(
    {"and", "the", "for", "with", "from", "our", "your", "you", "its", "this", "that", "are", "was", "all", "not"}
)


def site_name() -> str:
    return state.snapshot().name or ""


def folded(text: str) -> tuple[str, list[int] | None]:
    """``text`` without accents, and for each of its characters the index of the character of ``text`` it comes
    from (None when ``text`` is ASCII: the same positions)."""
    if text.isascii():
        return text, None
    pieces: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        plain = unaccented(char)
        pieces.append(plain)
        origins.extend([index] * len(plain))
    return "".join(pieces), origins


@functools.lru_cache(maxsize=16)
def site_name_pattern(name: str, exact: bool = False) -> re.Pattern[str] | None:
    """The site's own name as a pattern that finds it however a request writes it ("Lantern & Kettle",
    "lantern and kettle", "Café Noir" as "cafe noir"): its words without accents, in order, apart by anything that
    is not a word, or by "and" (an "&" is not a word). Matched against :func:`folded` text. ``exact``: in the
    name's own case, as a text written by the site would name it ("Tea", not the "tea" of "green tea")."""
    parts = [re.escape(word) for word in re.findall(r"\w+", folded(name)[0]) if word.lower() != "and"]
    if not parts:
        return None
    # Not "\W+(?:(?:and|&)\W+)?": "&" is \W already, and that alternative backtracks quadratically on " & & &...".
    return re.compile(r"\b" + r"\W+(?:and\W+)?".join(parts) + r"\b", 0 if exact else re.IGNORECASE)


@functools.lru_cache(maxsize=16)
def distinctive_name(name: str, texts: tuple[str, ...]) -> re.Pattern[str] | None:
    """:func:`site_name_pattern` for ``name`` when it names the site rather than something the capabilities talk
    about: when at least one of its words (of 3 letters or more, not a stopword) is in none of ``texts`` (the
    capabilities' own texts) except where they write the name itself ("Lantern" of "Lantern & Kettle"). A name
    made of common words ("Tea", "The Shop", "A") is None: replacing it would turn "Do you sell tea?" into "Do you
    sell you?", so requests and texts are routed as written."""
    pattern = site_name_pattern(name)
    if pattern is None:
        return None
    own = {word[:CUE_PREFIX] for word in re.findall(r"[^\W\d_]{3,}", folded(name)[0].lower())}
    own -= {word[:CUE_PREFIX] for word in NAME_STOPWORDS}
    if not own:
        return None
    exact = site_name_pattern(name, exact=True)
    assert exact is not None
    vocabulary: set[str] = set()
    for text in texts:
        vocabulary |= words(exact.sub(" ", folded(text)[0]))
    return pattern if own - vocabulary else None


def name_pattern(capabilities: Sequence[Capability] = ()) -> re.Pattern[str] | None:
    """The site's name as :func:`distinctive_name` finds it among the texts of ``capabilities`` and of every
    registered capability (the same answer whichever subset is being ranked), or None."""
    name = site_name()
    if not name.strip():
        return None
    texts = dict.fromkeys(
        text for capability in (*capability_registry, *capabilities) for text in declared_texts(capability)
    )
    return distinctive_name(name, tuple(texts))


def without_site_name(text: str, pattern: re.Pattern[str] | None) -> str:
    """``text`` with the site's own name (``pattern``, from :func:`name_pattern`) replaced by "you": a request
    talking to the site names it (the about question and the wish to reach a person alike), and a capability text
    that names it (an escalation "to a person at Lantern & Kettle") drew every such request, so the name is no
    evidence for any capability."""
    if pattern is None or not text:
        return text
    plain, origins = folded(text)
    if origins is None:
        return pattern.sub("you", text)
    kept: list[str] = []
    last = 0
    for match in pattern.finditer(plain):
        start = max(origins[match.start()], last)
        end = origins[match.end() - 1] + 1
        while end < len(text) and not unaccented(text[end]):  # the name's last letter's combining accents
            end += 1
        kept += [text[last:start], "you"]
        last = end
    kept.append(text[last:])
    return "".join(kept)


#: A word of a title or a request, as :func:`object_names` compares them (lowercased, without accents).
NAME_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
#: The titles of at most this many documents (by primary key: the same ones whatever was edited last) name the
#: objects of actions, and at most ``OBJECT_PAIRS`` pairs of their words are kept: every product of a shop, and a
#: bounded set (a few MB) for a catalogue of millions.
OBJECT_TITLES = 20000
OBJECT_PAIRS = 100000
#: What an object's name is replaced by in a request and in the texts it is compared with.
OBJECT_PLACEHOLDER = "it"


@dataclass(frozen=True, eq=False)
class ObjectNames:
    """The names of the objects of actions, as pairs of words in a row (:func:`object_names`), with a digest of them:
    equal and hashed by the digest, so a cache keyed by them compares two strings, not two sets of pairs."""

    pairs: frozenset[tuple[str, str]]
    digest: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectNames) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __bool__(self) -> bool:
        return bool(self.pairs)


NO_OBJECTS = ObjectNames(frozenset(), "")
_object_names: tuple[str, ObjectNames] | None = None
_object_names_lock = threading.Lock()


def name_words(text: str) -> list[str]:
    return [unaccented(word.casefold()) for word in NAME_WORD.findall(text)]


def pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(words))


def object_names() -> ObjectNames:
    """The names of the objects the site's actions act on, as pairs of words in a row: from the titles of the
    documents of every capability's ``applies_to`` models (a shop's products, "Dew of Yame Gyokuro": "yame
    gyokuro"), less the pairs that a capability's own intent or description says ("tea tasting" of "Book a tea
    tasting ..."), pairs holding a stop word ("dew of", "where is", "help me": a title such as "Where Is My Mind"
    names nothing a request says on its way) and pairs with a digit. Read once per state of the content
    (:func:`state.snapshot`'s token, which changes with any document or capability) and kept in the process; a new
    state with the same names keeps the same object.

    The object of a request is no evidence for which action is asked: the site's routing examples name products
    ("Quote for 12 Kyoto Hojicha tins"), and with the names left in, a stock question about the same product ("How
    many Kyoto Hojicha tins do you have left?") fits the quote by its object (see ``bench/README.md``)."""
    global _object_names
    token = state.snapshot().token
    current = _object_names
    if current is not None and current[0] == token:
        return current[1]
    with _object_names_lock:
        current = _object_names
        if current is not None and current[0] == token:
            return current[1]
        labels = {label.lower() for capability in capability_registry for label in capability.applies_to}
        models = [config.model for config in content_registry if config.label.lower() in labels]
        titles: list[str] = []
        if models:
            types = ContentType.objects.get_for_models(*models).values()
            titles = list(
                Document.objects.filter(content_type__in=types)
                .order_by("pk")
                .values_list("title", flat=True)[:OBJECT_TITLES]
            )
        declared: set[tuple[str, str]] = set()
        for capability in capability_registry:
            declared |= pairs(name_words(f"{capability.intent_text}. {capability.description}"))
        found: set[tuple[str, str]] = set()
        for title in titles:
            for pair in pairs(name_words(title)):
                if pair in declared or pair[0] in STOPWORDS or pair[1] in STOPWORDS:
                    continue
                if any(char.isdigit() for word in pair for char in word):
                    continue
                found.add(pair)
            if len(found) >= OBJECT_PAIRS:
                break
        digest = hashlib.sha256(json.dumps(sorted(found)).encode()).hexdigest() if found else ""
        names = (
            current[1] if current is not None and current[1].digest == digest else ObjectNames(frozenset(found), digest)
        )
        _object_names = (token, names)
        return names


def without_object_names(text: str, names: ObjectNames) -> str:
    """``text`` with each run of words that holds a pair of :func:`object_names` replaced by
    :data:`OBJECT_PLACEHOLDER` ("How many Kyoto Hojicha tins are left?": "How many it tins are left?")."""
    if not names or not text:
        return text
    words = [(match.start(), match.end(), unaccented(match.group().casefold())) for match in NAME_WORD.finditer(text)]
    named = [False] * len(words)
    for index in range(len(words) - 1):
        if (words[index][2], words[index + 1][2]) in names.pairs:
            named[index] = named[index + 1] = True
    if not any(named):
        return text
    kept: list[str] = []
    last = index = 0
    while index < len(words):
        if not named[index]:
            index += 1
            continue
        end = index
        while end + 1 < len(words) and named[end + 1]:
            end += 1
        kept += [text[last : words[index][0]], OBJECT_PLACEHOLDER]
        last = words[end][1]
        index = end + 1
    kept.append(text[last:])
    return "".join(kept)


def unnamed(text: str, pattern: re.Pattern[str] | None, objects: ObjectNames = NO_OBJECTS) -> str:
    """``text`` as it is routed: without the site's name (:func:`without_site_name`) nor its objects' names
    (:func:`without_object_names`)."""
    return without_object_names(without_site_name(text, pattern), objects)


def routed_texts(
    capability: Capability, pattern: re.Pattern[str] | None, objects: ObjectNames = NO_OBJECTS
) -> list[str]:
    """The texts a capability is routed by: :func:`~.texts.texts_of`, without the site's name (``pattern``) nor the
    names of the objects of actions (``objects``), each once (two examples naming two products are one text then)."""
    return list(unnamed_texts(tuple(texts_of(capability)), pattern, objects))


@functools.lru_cache(maxsize=256)
def unnamed_texts(texts: tuple[str, ...], pattern: re.Pattern[str] | None, objects: ObjectNames) -> tuple[str, ...]:
    """``texts`` as they are routed (:func:`unnamed`), each once: :func:`routed_texts`'s, and the declared texts the
    cue words are read from (:func:`~.scoring.rank`)."""
    # Per request, every capability's texts (hundreds, with a site's routing examples) would be rewritten again.
    return tuple(dict.fromkeys(unnamed(text, pattern, objects) for text in texts))
