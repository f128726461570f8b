"""Which capability a request in natural language is for.

Each capability is described by its intent, its description and each of its examples; a request's score for a
capability is the cosine similarity between the request's vector and the nearest of those texts (the mean of the
nearest few, and the site's name and topic left out: see below). The request's vector
is its embedding with the site's embedding backend, or a vector the caller brings (an agent's ``intent_vector``,
Agent Semantic Protocol §8), used as it is once :func:`intent_vector` has checked that it has the model's
dimensions and normalised it.

The capabilities' vectors are computed once per deployment, not per process or request: :func:`described` keeps
them in the ``CACHE_ALIAS`` cache (no expiry), one entry per capability and embedding model, with a hash of the
texts they were computed for: a deploy that changes the model computes them again, one that changes a text (or a
routing example filed) computes the new text alone, and every process behind a shared cache (Redis, Memcached, the
database) reads the first one's. With the default local-memory
cache that is once per process, still never per request, and a query's own LRU entries never push them out. The
site's topic (:func:`topic`, one average over the passages' vectors) is kept the same way, one entry per model that
holds the content's state token it was computed for, so it is computed again when the content changes. The
capabilities' vectors with the topic left out are computed once per model, texts and topic too, and kept in the
process (:func:`off_topic_described`).

:func:`route` chooses the best capability when it scores at least ``ROUTING_MIN_SCORE`` and no other is within
``ROUTING_MARGIN`` of it; otherwise the candidates are offered for the caller to choose (IntentWeb's
``clarification_request``, AHP's ``clarification_needed``).

Questions about the site's content. The capabilities' texts alone cannot tell a question about the content from
a request for an action (measured in ``bench/bench_routing.py``: almost every content question, "How hot should the
water be for gyokuro?", scored closer to a MODE3 capability, whose examples name the site's products, than to
``content_search``'s generic description). So a caller may name a ``default`` capability (AHP names
``content_search``), and the default's fit is taken from what it answers from: the site's content, as the best
passage's similarity to the request. An *action* capability (one with an ``action_type``: it reads live data or
changes something) competes only when it fits the request at least as well as the content, less
``ROUTING_CONTENT_MARGIN``; otherwise the request is a question, and goes to the default unless an answering
capability (``site_info``, ``contact``...) fits it clearly better by the usual rule. Answering a question the site
cannot answer costs a "not found"; starting an action nobody asked for costs more. Measured on the routing set's
256 phrasings (``ROUTING_CONTENT_MARGIN`` 0.1, chosen on its tune half): content questions reach content_search
94 % of the time instead of never; the price is stock questions about a product whose page states its stock, which
the content answers too (check_inventory 72 % -> 50 %). Two more signals, chosen on the tune half: the content an
action acts on (its ``applies_to`` models: a product's page for a stock check) is its object, not a competing answer,
so an action is weighed against the rest of the content; and a request that has one of a capability's cue words (a
word of its own texts that no other capability's texts have, :func:`cues`) adds ``ROUTING_CUE_WEIGHT`` to its score.
With them and examples for the built-in and demo capabilities: tune 94 -> 116 of 128, held-out 92 -> 101 of 128.
Then three more, measured on both halves (now both development data): a capability's fit is the mean of its
``ROUTING_NEAREST`` (2) closest texts, not its best one alone (the best of many examples is high by chance); the
site's own name counts for no capability (every request talks to the site, and a description naming it drew the
about questions), when one of its words is not a word the capabilities' texts use (a site called "Tea" is left in
"Do you sell tea?"); ``ROUTING_MARGIN`` 0.03 -> 0.01. With 34 more examples for the demo's MODE3 capabilities: tune
116 -> 116, held-out 101 -> 115 of 128 (the router's part alone, on the old examples: 116 -> 117 and 101 -> 108).
Then two more, measured on both halves (tune / held-out of 128 each, from 115 / 120): the site's topic (the direction
of the mean of its passages' vectors, :func:`topic`) is left out of the request's and the texts' vectors before a
capability's fit is taken (every request to a tea shop is about tea, and so are the booking's examples: "Who runs
this tea shop?" went to the booking), as the site's name is; the fit with the topic left in is still what an action
is weighed against the content by, since the passages' similarities keep it (leaving it out there too: 116 / 116).
And among the answering capabilities the default's fit is also the content's, outside what the others answer from
(the about pages are site_info's), less ``QUESTION_CONTENT_MARGIN`` (:func:`as_question`): content_search's two
generic texts lost content questions to site_info's examples, which are questions too. Each alone: 117 / 119 and
116 / 121; both: 119 / 121 (the about pages counted as well: 117 / 120). contact's and site_info's texts were
rewritten from what they answer (contact: opening hours, where to find the business; site_info: what it sells,
its people, its policies' terms): alone 115 / 120 -> 112 / 118 (they took questions from content_search), with the
two changes 119 / 121, as without them; kept for the requests their old texts missed. Measured and not kept: a
shrinkage-LDA classifier fitted on the capabilities' texts (with or without the topic), its posterior added to the
fit: on top of the above, tune 120 for every setting tried, held-out 119 to 122 (121 on average: no better);
centring on the mean of the capabilities' texts (117 / 119 at best, on the earlier router); an answering
capability's own content (site_info's about pages) as its fit (113 / 121 at best).

A request that only names a topic ("tea", "green tea", "tasting", "orders": at most ``ROUTING_TOPIC_WORDS`` words,
no digit, :func:`names_a_topic`) asks for no action: with a default, no action capability competes for it, and it
is answered as a question (the answering capabilities by the usual rule, then the default). Its fit cannot tell it
from an action: the vector of a word or two is its object's, and fits the action whose examples name that object as
well as a request for the action does (measured on the demo, off-topic / with the topic: "tasting" 0.50 / 0.58 for
book_appointment, "book tasting" 0.51 / 0.58; "orders" 0.65 for order_status, "where is my order" 0.72; "tea" 0.66
with the topic for book_appointment, whose examples say "tea tasting", above the content's 0.61 less the margin), so
an anonymous agent asking about "tea" was refused a booking with a 401. Of 56 topics of the demo's content (53 of
one or two words), 15 went to an action that requires a key (book_appointment: "tea", "green tea", "tea set",
"white tea", "tea ceremony", "tea accessories", "teaware", "tasting", "samplers"...; order_status: "shipping",
"order", "orders"), 11 to a stock check or a quote ("whisk", "prices") and 5 to a clarification among actions
("teapot"); now each of the 53 is answered (content_search, site_info, get_video), and the three-word "loose leaf
tea" still goes to book_appointment. The form tells them apart: an action is something to do (a verb) and something
to do it to, or input for it (a number: an order, a quantity, a date); a word or two with no number names a thing,
and what the site can say about a thing is its content. Two words that do ask for an action ("book tasting", "order
status", "human") are answered as questions too (how to book, how to track an order, how to reach the shop); a
request in a sentence, or with a number ("track LK-1234"), is routed as before, and a 401 for an action it asks of
an anonymous agent ("where is my order LK-1234") is right. None of the 384 development phrasings is so short (the
shortest have three words), so the routing set's figures are unchanged. The rule reads the text the site embeds: an
agent's own ``intent_vector`` is routed as it is.

An answer to a clarification names its choice by number ("2", "the second"), by name or intent, or chooses it in
words that fit it clearly among the candidates only (by :func:`route_ranked`'s rule) and fit it at least
``ROUTING_CHOICE_MIN_SCORE``, which words unrelated to every option do not reach; an answer that chooses none
of them (a number past the list, another capability's name, words that fit none clearly) is an unknown capability,
and the question stays open (:func:`choose`). :func:`offer` keeps the candidates' names in a session and
:func:`resume` reads the choice on the next turn against that list, not against the capabilities offered by then: a
number counts the options as they were listed, and an option withdrawn since is an unknown capability, not the one
that took its place (:func:`chosen_option`).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.contenttypes.models import ContentType
from django.core.cache import caches
from django.db import DatabaseError, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone
from django.utils.crypto import salted_hmac

from .. import state
from ..conf import app_settings
from ..insights import recording
from ..models import Document, RoutingExample
from ..registry import Capability, capability_registry, content_registry
from ..retrieval.embeddings import EmbeddingBackend, EmbeddingUnavailable, get_embedding_backend
from ..retrieval.hybrid import Filters, HybridRetriever
from ..retrieval.index import EmbeddingModelChanged, current_index, passages_mean
from . import errors
from .conversation import Owner, SessionError, load_session, new_session
from .extractive import STOPWORDS, unaccented

logger = logging.getLogger(__name__)
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
#: The ``pending_clarification`` of a session whose next turn chooses among routed capabilities.
PENDING_KIND = "routing"
#: Cue words are compared by their first letters (see :func:`words`).
CUE_PREFIX = 5
#: How much a passage's similarity is discounted before it counts as the default capability's fit among the
#: answering capabilities (see :func:`as_question`); chosen on the routing set's tune half (0.1-0.3 measured).
QUESTION_CONTENT_MARGIN = 0.2
#: The site's topic is the mean of at most about this many passages' vectors (a random sample of the table's pages
#: beyond it): the mean of a few thousand is the mean of a hundred thousand to within noise, and it is computed again
#: after every change to the content.
TOPIC_SAMPLE = 5000


@dataclass(frozen=True)
class Scored:
    capability: Capability
    #: The capability's fit to the request, the site's topic left out (see :func:`rank`): what it is chosen by.
    score: float
    #: The same fit with the site's topic left in, as the content's own fit has it: what an action capability is
    #: weighed against the content by (None: the same as ``score``).
    topical: float | None = None

    @property
    def against_content(self) -> float:
        return self.score if self.topical is None else self.topical


@dataclass
class Route:
    """The capability chosen, or None with the candidates to offer (best first)."""

    chosen: Capability | None
    ranked: list[Scored] = field(default_factory=list)
    #: The default capability was chosen because no action capability claimed the request.
    defaulted: bool = False

    @property
    def candidates(self) -> list[Capability]:
        return [item.capability for item in self.ranked]


def declared_texts(capability: Capability) -> list[str]:
    """What a capability says of itself: its intent, its description and the examples it declares."""
    return [capability.intent_text, capability.description, *capability.examples]


def texts_of(capability: Capability) -> list[str]:
    """The texts a capability is routed by: :func:`declared_texts` and the site's own routing examples for it
    (:func:`site_examples`). The examples are requests, and count only as such: the site's name and the cue words are
    read from what the capabilities declare (an example naming the site, "what is lantern and kettle", would make its
    name a word the capabilities use; one filed under another capability would take a cue word away)."""
    return [*declared_texts(capability), *site_examples().get(capability.name, ())]


#: At most this many of a capability's routing examples are used, the newest: each is a vector to compute once per
#: deployment, and a capability's fit is its nearest texts', which a few dozen good examples settle.
SITE_EXAMPLES_PER_CAPABILITY = 200
_site_examples: tuple[float, dict[str, tuple[str, ...]]] | None = None
_site_examples_lock = threading.Lock()
#: Counts :func:`forget_site_examples` calls: examples read while one was made (a save committing meanwhile) are used
#: for that request only, not kept for ``STATE_TTL``.
_site_examples_generation = 0


def site_examples() -> dict[str, tuple[str, ...]]:
    """The site's routing examples (:class:`~agent_handshake.models.RoutingExample`) by capability name, oldest
    first, at most :data:`SITE_EXAMPLES_PER_CAPABILITY` each. A process reads them again after ``STATE_TTL``
    seconds, as it does the content's state, and at once after a save or delete it made (:func:`forget_site_examples`,
    on commit); a name no capability has is read and never used."""
    global _site_examples
    current = _site_examples
    if current is not None and time.monotonic() - current[0] < app_settings.STATE_TTL:
        return current[1]
    with _site_examples_lock:
        current = _site_examples
        if current is not None and time.monotonic() - current[0] < app_settings.STATE_TTL:
            return current[1]
        read_at, generation = time.monotonic(), _site_examples_generation
        newest = (
            RoutingExample.objects.annotate(
                place=Window(RowNumber(), partition_by=[F("capability")], order_by=F("pk").desc())
            )
            .filter(place__lte=SITE_EXAMPLES_PER_CAPABILITY)
            .order_by("capability", "pk")
            .values_list("capability", "text")
        )
        found: dict[str, list[str]] = {}
        try:
            with transaction.atomic():  # a savepoint: a failed read leaves the request's own transaction usable
                for name, text in newest:
                    found.setdefault(name, []).append(text)
        except DatabaseError:
            # The table missing (code deployed before `migrate`) or the database refusing: route by what the
            # capabilities declare, and look again after STATE_TTL rather than on every request.
            logger.exception("The routing examples could not be read; routing without them")
            found = {}
        examples = {name: tuple(texts) for name, texts in found.items()}
        if generation == _site_examples_generation:
            _site_examples = (read_at, examples)
        return examples


def forget_site_examples() -> None:
    """Read the routing examples again on the next request (after one was saved or deleted)."""
    global _site_examples, _site_examples_generation
    _site_examples_generation += 1
    _site_examples = None


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
    ("Quote for 12 Kyoto Hojicha tins"), and before the names were left out a stock question about the same product
    ("How many Kyoto Hojicha tins do you have left?") went to the quote (measured in ``bench/bench_routing.py``)."""
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
    """The texts a capability is routed by: :func:`texts_of`, without the site's name (``pattern``) nor the names
    of the objects of actions (``objects``), each once (two examples naming two products are one text then)."""
    return list(_routed(tuple(texts_of(capability)), pattern, objects))


@functools.lru_cache(maxsize=256)
def _routed(texts: tuple[str, ...], pattern: re.Pattern[str] | None, objects: ObjectNames) -> tuple[str, ...]:
    # Per request, every capability's texts (hundreds, with a site's routing examples) would be rewritten again.
    return tuple(dict.fromkeys(unnamed(text, pattern, objects) for text in texts))


def cache_key(backend: EmbeddingBackend, texts: Sequence[str]) -> str:
    """What names a capability's matrix of vectors: the model and the texts (a digest of them)."""
    digest = hashlib.sha256(json.dumps([backend.model_id, backend.dimensions, list(texts)]).encode()).hexdigest()
    return f"agent_handshake:routing:{digest}"


def vectors_key(backend: EmbeddingBackend, name: str) -> str:
    """Where a capability's vectors are kept for ``backend``'s model: one entry per capability and model, so texts
    that change (a routing example filed or deleted) replace its entry rather than leave one behind. Keyed with the
    site's ``SECRET_KEY`` too: two sites sharing one cache (staging and production on one Redis, without a
    ``KEY_PREFIX``) each keep their own, rather than each computing its texts again over the other's."""
    digest = salted_hmac(__name__, json.dumps([backend.model_id, backend.dimensions, name]), algorithm="sha256")
    return f"agent_handshake:routing:vectors:{digest.hexdigest()}"


def _stored(entry: Any, backend: EmbeddingBackend) -> tuple[str, tuple[str, ...], np.ndarray] | None:
    """A capability's cache entry as :func:`keyed_described` writes it, or None for anything else (an entry of
    another format, written by another version of the app, is computed again rather than break routing)."""
    if not (isinstance(entry, tuple) and len(entry) == 3):
        return None
    key, texts, matrix = entry
    if not (isinstance(key, str) and isinstance(texts, tuple) and isinstance(matrix, np.ndarray)):
        return None
    return entry if matrix.shape == (len(texts), backend.dimensions) else None


def described(capabilities: Sequence[Capability], backend: EmbeddingBackend | None = None) -> list[np.ndarray]:
    """Each capability's text vectors (one row per text of :func:`routed_texts`), from the cache where they are."""
    return [matrix for _, matrix in keyed_described(capabilities, backend)]


def keyed_described(
    capabilities: Sequence[Capability], backend: EmbeddingBackend | None = None
) -> list[tuple[str, np.ndarray]]:
    """:func:`described`, each matrix with its :func:`cache_key` (the model and the texts).

    Each capability's entry (:func:`vectors_key`) holds the key of the texts it was computed for, the texts and the
    matrix. When its texts have changed, the vectors of the texts it already held are kept and only the new texts
    are computed: one example filed costs one text's run, not its capability's two hundred."""
    backend = backend or get_embedding_backend()
    cache = caches[app_settings.CACHE_ALIAS]
    pattern = name_pattern(capabilities)
    objects = object_names()
    described_texts = [routed_texts(capability, pattern, objects) for capability in capabilities]
    keys = [cache_key(backend, texts) for texts in described_texts]
    slots = [vectors_key(backend, capability.name) for capability in capabilities]
    stored = {slot: entry for slot, entry in cache.get_many(slots).items() if _stored(entry, backend)}
    found: dict[str, np.ndarray] = {}
    stale = []
    for key, slot, texts in zip(keys, slots, described_texts, strict=True):
        entry = stored.get(slot)
        if entry is not None and entry[0] == key:
            found[key] = entry[2]
        else:
            stale.append((key, slot, texts))
    if stale:
        known: dict[str, np.ndarray] = {}
        for _, slot, _ in stale:
            if slot in stored:
                _, held_texts, matrix = stored[slot]
                known.update(zip(held_texts, matrix, strict=True))
        new = [text for text in dict.fromkeys(text for _, _, texts in stale for text in texts) if text not in known]
        if new:
            try:
                # compute, not embed: these belong in the shared cache, not in the process's LRU of query texts.
                known.update(zip(new, np.asarray(backend.compute(new), dtype=np.float32), strict=True))
            except EmbeddingUnavailable as exc:
                logger.exception("Routing is unavailable")
                raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
        computed = {}
        for key, slot, texts in stale:
            found[key] = (
                np.stack([known[text] for text in texts]) if texts else np.zeros((0, backend.dimensions), np.float32)
            )
            computed[slot] = (key, tuple(texts), found[key])
        cache.set_many(computed, timeout=None)
    return [(key, found[key]) for key in keys]


def topic_key(backend: EmbeddingBackend) -> str:
    """The cache key of the site's topic for ``backend``'s model: one per model, whatever the content's state."""
    return (
        "agent_handshake:routing:topic:"
        + hashlib.sha256(json.dumps([backend.model_id, backend.dimensions]).encode()).hexdigest()
    )


def topic(backend: EmbeddingBackend | None = None) -> np.ndarray | None:
    """The site's topic: the direction of the mean of its passages' vectors (normalised), or None without passages
    (or while the stored vectors are another model's, until ``agent_reindex --rebuild``).

    Computed once per state of the content and kept in the ``CACHE_ALIAS`` cache, like the capabilities' vectors:
    one entry per model, holding the state token it was computed for and the vector (float32 bytes), overwritten
    after a change, so that changes leave no entries behind; from a sample when the site has more than
    ``TOPIC_SAMPLE`` passages (:func:`~agent_handshake.retrieval.index.passages_mean`, the same sample in every
    process for one state), so that the first request after a change pays a bounded cost."""
    backend = backend or get_embedding_backend()
    key = topic_key(backend)
    token = state.snapshot().token
    cache = caches[app_settings.CACHE_ALIAS]
    found = cache.get(key)
    if not (isinstance(found, tuple) and len(found) == 2 and found[0] == token):
        try:
            index = current_index(backend, create=False)
        except EmbeddingModelChanged:
            return None
        mean = passages_mean(int(index.dimensions), TOPIC_SAMPLE, seed=token) if index is not None else []
        found = (token, np.asarray(mean, dtype=np.float32).tobytes())
        cache.set(key, found, timeout=None)
    direction = np.frombuffer(found[1], dtype=np.float32)
    if len(direction) != backend.dimensions:
        return None
    norm = float(np.linalg.norm(direction))
    return direction / norm if norm > 0 else None


def off_topic(vectors: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``vectors`` (one, or one per row) without their component along ``direction`` (a unit vector), normalised."""
    rest = vectors - np.multiply.outer(vectors @ direction, direction)
    norms = np.linalg.norm(rest, axis=-1, keepdims=True)
    return rest / np.where(norms > 0, norms, 1)


#: How many capabilities' matrices :func:`off_topic_described` keeps per process (each a few KB: a row of
#: the model's dimensions per text): every capability of a large site's registry, under a few MB.
OFF_TOPIC_ENTRIES = 256
_off_topic: collections.OrderedDict[tuple[str, bytes], np.ndarray] = collections.OrderedDict()
_off_topic_lock = threading.Lock()


def off_topic_described(key: str, matrix: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``off_topic(matrix, direction)`` for a capability's text vectors (``key``, their :func:`cache_key`), computed
    once per model, texts and topic rather than on every request (it was a sixth of :func:`rank`'s time, measured on
    the demo's ten capabilities). Kept in the process, not the shared cache as :func:`described` keeps the vectors:
    recomputing it costs less than reading it back from a cache (the vectors cost a model's run), and one entry per
    state of the content would stay behind in a cache without expiry."""
    entry = (key, direction.tobytes())
    with _off_topic_lock:
        found = _off_topic.get(entry)
        if found is not None:
            _off_topic.move_to_end(entry)
            return found
    found = off_topic(matrix, direction)
    found.setflags(write=False)  # shared by every request of the process
    with _off_topic_lock:
        _off_topic[entry] = found
        while len(_off_topic) > OFF_TOPIC_ENTRIES:
            _off_topic.popitem(last=False)
    return found


def intent_vector(
    values: Sequence[Any], backend: EmbeddingBackend | None = None, *, name: str = "intent_vector"
) -> np.ndarray:
    """A caller's intent vector, checked (finite numbers, the site model's dimensions, not all zero, a length that
    32-bit floats can hold) and normalised; :class:`~.errors.InvalidInput` naming ``name`` otherwise."""
    backend = backend or get_embedding_backend()
    numbers = isinstance(values, (list, tuple)) and all(
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) for value in values
    )
    if not numbers:
        raise errors.InvalidInput(f"{name} must be a list of finite numbers.", fields=[name])
    if len(values) != backend.dimensions:
        raise errors.InvalidInput(
            f"{name} has {len(values)} dimensions; this site's embedding model ({backend.model_id}) has "
            f"{backend.dimensions}. Send the query alone and the site embeds it.",
            fields=[name],
            dimensions=backend.dimensions,
            model=backend.model_id,
        )
    if not any(values):
        raise errors.InvalidInput(f"{name} must not be all zeros.", fields=[name])
    # Finite numbers can still have a length beyond float32's range: squared, 1e20 overflows and 1e-25 underflows
    # (and past about 3e38 a number is no float32 at all). Such a vector has no direction the model's can be
    # compared with here; the warnings numpy would print for it are this error.
    with np.errstate(over="ignore", under="ignore"):
        vector = np.asarray(values, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0:
        raise errors.InvalidInput(
            f"{name} could not be normalised: its length is beyond the range of 32-bit floats. Send it at unit "
            "length (as embedding models return it).",
            fields=[name],
        )
    return vector / norm


def embed_query(text: str) -> np.ndarray:
    return embed_queries([text])[0]


def embed_queries(texts: Sequence[str]) -> np.ndarray:
    """The vectors of ``texts`` (a request as written and without the site's name), in one backend call."""
    try:
        return get_embedding_backend().embed(texts)
    except EmbeddingUnavailable as exc:
        logger.exception("Routing is unavailable")
        raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc


#: Scripts written without spaces between words (Han, hiragana, katakana): each of their characters counts as a
#: word in :func:`names_a_topic` (two characters are a word or two; a sentence is many).
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
TOPIC_WORD = re.compile(rf"[{UNSPACED}]|[^\W\d_{UNSPACED}]+")


def names_a_topic(text: str) -> bool:
    """Whether a request only names a topic ("tea", "green tea"): at least one and at most ``ROUTING_TOPIC_WORDS``
    words (runs of letters, or characters of a script written without spaces), and no digit, which would be input
    for an action (an order number, a quantity, a date). See the module's docstring."""
    limit = app_settings.ROUTING_TOPIC_WORDS
    if not limit or any(char.isdigit() for char in text):
        return False
    return 0 < len(TOPIC_WORD.findall(text)) <= limit


def words(text: str) -> set[str]:
    """A text's words as cue tokens: lowercased, their first ``CUE_PREFIX`` letters (a crude stem that serves any
    language that writes words apart: "booking" and "book", "stocked" and "stock"), numbers and short words out."""
    return {word[:CUE_PREFIX] for word in re.findall(r"[^\W\d_]{3,}", text.lower())}


@functools.lru_cache(maxsize=64)
def cues(described_texts: tuple[tuple[str, ...], ...]) -> list[frozenset[str]]:
    """Each capability's cue words: the words of its own texts that no other capability's texts have."""
    bags = [set().union(*(words(text) for text in texts)) for texts in described_texts]
    return [frozenset(bag.difference(*bags[:index], *bags[index + 1 :])) for index, bag in enumerate(bags)]


def nearest_mean(similarities: np.ndarray) -> float:
    """A capability's fit from its texts' similarities to a request: the mean of the ``ROUTING_NEAREST`` best (all
    when it has fewer). One close text (the best alone) favours the capabilities with the most examples, whose
    best of many is high by chance; the second best has to agree."""
    nearest = min(app_settings.ROUTING_NEAREST, len(similarities))
    return float(np.mean(np.partition(similarities, -nearest)[-nearest:]))


def rank(text: str, capabilities: Sequence[Capability], *, vector: np.ndarray | None = None) -> list[Scored]:
    """``capabilities`` by their fit to ``text`` (or to ``vector``, already normalised, when given): the mean
    similarity of their ``ROUTING_NEAREST`` closest texts (:func:`nearest_mean`), plus ``ROUTING_CUE_WEIGHT`` when
    ``text`` has one of the capability's cue words (:func:`cues`), best first (ties keep the given order). The site's
    own name counts for none of them when it is distinctive (:func:`name_pattern`, :func:`without_site_name`), nor
    does its topic (:func:`topic`, :func:`off_topic`): the fit with the topic left in is kept as
    :attr:`Scored.topical`, for weighing an action against the content."""
    if not capabilities:
        return []
    backend = get_embedding_backend()
    keyed = keyed_described(capabilities, backend)
    matrices = [matrix for _, matrix in keyed]
    pattern = name_pattern(capabilities)
    objects = object_names()
    routed = unnamed(text, pattern, objects)
    if vector is None:
        vector = embed_query(routed)
    topical = [nearest_mean(matrix @ vector) for matrix in matrices]
    direction = topic(backend)
    if direction is None:
        scores = list(topical)
    else:
        request = off_topic(vector, direction)
        scores = [nearest_mean(off_topic_described(key, matrix, direction) @ request) for key, matrix in keyed]
    weight = app_settings.ROUTING_CUE_WEIGHT
    if weight and text:
        asked = words(routed)
        declared = tuple(_routed(tuple(declared_texts(c)), pattern, objects) for c in capabilities)
        for index, own in enumerate(cues(declared)):
            if asked & own:
                scores[index] += weight
                topical[index] += weight
    order = sorted(range(len(capabilities)), key=lambda index: -scores[index])
    return [
        Scored(capabilities[index], scores[index], None if direction is None else topical[index]) for index in order
    ]


def content_fit(vector: np.ndarray, capability: Capability, excluding: Sequence[str] = ()) -> float:
    """How well the site's content fits a request: the best cosine similarity of a passage that ``capability``
    answers from (all content when it names no models), leaving out the models ``excluding`` names, to
    ``vector``; 0 with an empty index (or nothing left)."""
    models = capability.models
    if excluding:
        left_out = {label.lower() for label in excluding}
        models = tuple(
            config.label
            for config in content_registry
            if config.label.lower() not in left_out and (not models or config.label in models)
        )
        if not models:
            return 0.0
    retriever = HybridRetriever()
    try:
        # A full candidate list, not one row: with a filter, pgvector's iterative scan would stop at the first row
        # that passes it, which on the HNSW plan of a large site is often not the nearest.
        nearest = retriever.vector_candidates(vector, Filters(models=models), app_settings.HNSW_EF_SEARCH)
    except EmbeddingModelChanged as exc:
        # The content's fit cannot be measured until the passages are embedded again with the configured model.
        logger.exception("Routing is unavailable")
        raise errors.Unavailable(f"Routing is unavailable right now: {exc}") from exc
    return nearest[0][1] if nearest else 0.0


def route(
    text: str,
    capabilities: Sequence[Capability],
    *,
    vector: np.ndarray | None = None,
    default: Capability | None = None,
) -> Route:
    """The capability for ``text`` among ``capabilities``, or the close candidates to offer.

    With a ``default`` (one of ``capabilities``, the capability that answers questions from the site's content):
    an action capability competes only when it fits the request at least as well as the content does, less
    ``ROUTING_CONTENT_MARGIN`` (and from ``ROUTING_MIN_SCORE``). When none does, the request is a question: the
    answering capabilities compete by the usual rule, and a tie or a low score goes to the default rather than
    to a clarification (see the module's docstring). A ``text`` that only names a topic (:func:`names_a_topic`,
    when it is what is embedded: no ``vector``) is such a question whatever the actions' fit."""
    topic_only = vector is None and names_a_topic(text)
    ranking_vector = vector
    if vector is None and capabilities:
        # The content's fit takes the request as it is (the about page names the site); the capabilities' fit
        # takes it without the site's name: both in one call to the model when the name is in it.
        routed = unnamed(text, name_pattern(capabilities), object_names())
        if routed == text:
            vector = ranking_vector = embed_query(text)
        else:
            vector, ranking_vector = embed_queries([text, routed])
    ranked = rank(text, capabilities, vector=ranking_vector)
    if not ranked:
        return Route(None, [])
    if default is not None:
        assert vector is not None
        fits: dict[tuple[str, ...], float] = {}

        def fit(excluding: Sequence[str]) -> float:
            # One search per set of models left out: an action's floor and the question's fit often leave out the
            # same (a get_<model> answers from the model a stock check acts on; with neither, the whole content).
            key = tuple(sorted({label.lower() for label in excluding}))
            if key not in fits:
                fits[key] = content_fit(vector, default, key)
            return fits[key]

        def floor(capability: Capability) -> float:
            # The content an action acts on (its applies_to models: a product for a stock check) is its object,
            # not a competing answer: the action is weighed against the rest of the content.
            margin = app_settings.ROUTING_CONTENT_MARGIN
            return max(app_settings.ROUTING_MIN_SCORE, fit(list(capability.applies_to)) - margin)

        claimed = [
            item
            for item in ranked
            if not item.capability.action_type or (not topic_only and item.against_content >= floor(item.capability))
        ]
        if not any(item.capability.action_type for item in claimed):
            answering = route_ranked(as_question(claimed, default, vector, content=fit))
            if answering.chosen is None or answering.chosen is default:
                return Route(default, ranked, defaulted=answering.chosen is None)
            return Route(answering.chosen, ranked)
        ranked = claimed
    return route_ranked(ranked)


def as_question(
    ranked: list[Scored],
    default: Capability,
    vector: np.ndarray,
    *,
    content: Callable[[Sequence[str]], float] | None = None,
) -> list[Scored]:
    """``ranked`` (answering capabilities only) with the ``default``'s fit taken from the content as well as from
    its texts: the best passage outside what the other capabilities answer from (``site_info``'s about pages, a
    ``get_<model>``'s model), less ``QUESTION_CONTENT_MARGIN``, when that is more. The default's two generic texts
    fit a content question ("What is L-theanine?") less than ``site_info``'s or ``contact``'s examples, which are
    questions too; the passage that answers it fits it well. The content they answer from is left out, as an
    action's object is (an about page fits the about question). ``content``: that passage's similarity given the
    models left out, from searches :func:`route` already made for this request (:func:`content_fit` otherwise)."""
    theirs = {label for item in ranked if item.capability is not default for label in item.capability.models}
    if content is None:
        content = functools.partial(content_fit, vector, default)
    fit = content(tuple(sorted(theirs))) - QUESTION_CONTENT_MARGIN
    adjusted = [
        Scored(item.capability, max(item.score, fit), item.topical) if item.capability is default else item
        for item in ranked
    ]
    return sorted(adjusted, key=lambda item: -item.score)


def route_ranked(ranked: list[Scored]) -> Route:
    if not ranked:
        return Route(None, [])
    best = ranked[0].score
    if best < app_settings.ROUTING_MIN_SCORE:
        return Route(None, ranked)
    close = [item for item in ranked if best - item.score <= app_settings.ROUTING_MARGIN]
    if len(close) > 1:
        return Route(None, close)
    return Route(ranked[0].capability, ranked)


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
    words that fit it clearly among the candidates alone (``ROUTING_MARGIN``, as :func:`route_ranked` has it) and
    fit it at least ``ROUTING_CHOICE_MIN_SCORE``. None when it chooses none of them: a number past the list, the
    name of a capability not on it, words that fit none clearly. (Ranked whatever they were, "4" of three options
    chose the second, "content_search" one of the others, "neither" the best of them.)

    Words that name no option have a floor of their own, above ``ROUTING_MIN_SCORE``: a request is weighed against
    every capability and the site's content, an answer only among the few options, and MiniLM gives any short text
    a cosine of about 0.2 with any other, so the best of two or three options cleared 0.2 for words that mean none
    of them ("teleport" chose escalate_to_human, "yes" check_inventory). Measured on the demo's capabilities (7
    sets of options, 49 unrelated answers, 76 answers meaning an option): the unrelated answers' best option scored
    0.20 at the median, 0.32 at the 95th percentile and at most 0.352 ("hello" for site_info, which it still
    chooses; "hello" 0.34 for escalate_to_human, "no" 0.33, "yes" 0.32); the meant ones 0.58 at the median, 0.38 at
    the 5th percentile ("availability" 0.349 and "reserve" 0.29, below the floor, now ask again). An answer that
    chooses nothing only keeps the question open; one that chooses wrongly runs a capability, or answers 401."""
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


# --- Asking which one, in a session --------------------------------------------------------------------------


@dataclass(frozen=True)
class Offer:
    """A clarification listing routed candidates, kept in the session ``session_id``."""

    session_id: str
    question: str
    options: list[str]


def offer(route: Route, query: str, requesting_agent: str, owner: Owner) -> Offer:
    """Keep ``route``'s candidates (or, when nothing fitted, the best few) in a new session and ask which one."""
    candidates = route.candidates[:4]
    listed = "; ".join(f"{number}. {c.name}: {c.intent_text}" for number, c in enumerate(candidates, 1))
    if route.ranked and route.ranked[0].score >= app_settings.ROUTING_MIN_SCORE:
        question = f"Several capabilities fit this request. Which one did you mean? {listed}"
    else:
        question = f"No capability clearly fits this request. Did you mean one of these? {listed}"
    session = new_session("", requesting_agent, owner)
    session.pending_clarification = {
        "kind": PENDING_KIND,
        "question": question,
        "options": [c.name for c in candidates],
        "query": query,
    }
    session.save()
    recording.note(outcome=recording.Outcome.CLARIFICATION)
    return Offer(session.pk, question, [c.name for c in candidates])


def resume(
    session_id: str, owner: Owner, answer: str | None, capabilities: Sequence[Capability]
) -> tuple[Capability | None, bool]:
    """The capability a continuing session is for, and whether ``answer`` chose it: the choice ``answer`` makes
    among the candidates a routing clarification offered (recorded on the session), or the capability the session
    already has. None when the session has neither (the request is routed afresh). An answer that chooses no option
    is :class:`~.errors.UnknownCapability` (:func:`chosen_option`), the session left as it was; an unknown, expired or
    foreign session is :class:`~.errors.NotFound`/:class:`~.errors.Gone`."""
    with transaction.atomic():
        try:
            session = load_session(session_id, owner, lock=True)
        except SessionError as exc:
            error = errors.Gone if exc.status == 410 else errors.NotFound
            raise error(exc.message, reason=exc.reason) from exc
        offered = {capability.name: capability for capability in capabilities}
        pending = session.pending_clarification or {}
        if pending.get("kind") == PENDING_KIND:
            if not answer:
                return None, False
            chosen = chosen_option(answer, pending.get("options", []), offered)
            session.capability = chosen.name
            session.pending_clarification = None
            session.last_active_at = timezone.now()
            session.save()
            return chosen, True
        return offered.get(session.capability), False


def chosen_option(answer: str, options: Sequence[str], offered: dict[str, Capability]) -> Capability:
    """The capability ``answer`` chooses among ``options``, the names a clarification listed, as they were listed:
    a number counts them on that list, not on what is ``offered`` now (which may have lost one since, or gained one).
    :class:`~.errors.UnknownCapability` when it chooses none of them (:func:`choose`), when the choice is an option
    no longer offered, or when one is gone and the answer is free text: ranked among those left, it would get a
    capability that an answer meaning the gone one did not choose. The clarification stays open for another
    answer."""
    gone = [name for name in options if name not in offered]
    if not gone:
        chosen = choose(answer, [offered[name] for name in options])
        if chosen is not None:
            return chosen
        listed = "; ".join(f"{number}. {name}" for number, name in enumerate(options, 1))
        raise errors.UnknownCapability(
            f"The answer chooses none of the options ({listed}). Choose one by its number or name, or send the "
            "request without this session.",
            fields=["clarification"],
            available_capabilities=list(offered),
        )
    index = numbered(answer, len(options))
    lowered = answer.lower()
    named = [
        name
        for name in options
        if name in lowered or (name in offered and offered[name].intent_text.lower() in lowered)
    ]
    picked = options[index] if index is not None else named[0] if len(named) == 1 else None
    if picked is not None and picked in offered:
        return offered[picked]
    if picked is not None:
        message = f"The capability {picked!r} you chose is no longer offered."
    else:
        listed = ", ".join(repr(name) for name in gone)
        message = f"Since this question was asked, {listed} {'is' if len(gone) == 1 else 'are'} no longer offered."
    raise errors.UnknownCapability(
        f"{message} Choose another option by its number or name, or send the request without this session.",
        fields=["clarification"],
        available_capabilities=list(offered),
    )
