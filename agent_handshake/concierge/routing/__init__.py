"""Which capability a request in natural language is for.

Each capability is described by its intent, its description and each of its examples, and by the site's own
routing examples for it (:mod:`.texts`). A request's score for a capability is the cosine similarity between the
request's vector and the capability's texts (:mod:`.scoring`): the mean of the nearest few, the site's name and the
names of the actions' objects left out of both (:mod:`.masking`), the site's topic left out of both vectors
(:mod:`.site_topic`), and a bonus for a word only that capability's texts use (:mod:`.cue_words`). The request's
vector is its embedding with the site's embedding backend, or a vector the caller brings (an agent's
``intent_vector``, Agent Semantic Protocol §8), checked and normalised (:mod:`.query_vectors`); the capabilities'
vectors are computed once per deployment and kept in the ``CACHE_ALIAS`` cache (:mod:`.vector_cache`).

:func:`route` (:mod:`.decision`) chooses the best capability when it scores at least ``ROUTING_MIN_SCORE`` and no
other is within ``ROUTING_MARGIN`` of it; otherwise the candidates are offered for the caller to choose (IntentWeb's
``clarification_request``, AHP's ``clarification_needed``). With a ``default`` capability (AHP names
``content_search``) the site's content competes too (:mod:`.content`): an action capability has to fit the request
better than the content does, and a request that only names a topic is a question (:mod:`.topic_requests`). The
answer to a clarification chooses among the options by number, name or words (:mod:`.choosing`); the options are
kept in a session between the two turns (:mod:`.clarification`).

The modules, each one job, import each other in this order and never this package: :mod:`.texts`,
:mod:`.cue_words`, :mod:`.masking`, :mod:`.vector_cache`, :mod:`.query_vectors`, :mod:`.site_topic`,
:mod:`.topic_requests`, :mod:`.scoring`, :mod:`.content`, :mod:`.decision`, :mod:`.choosing`, :mod:`.clarification`.

The names the rest of the app uses (the concierge, the signal handlers, the admin, the tests and the benchmarks)
are imported from this package. A test that replaces a function replaces it in the module that calls it
(``masking.site_name``, ``site_topic.off_topic``): the names here are only imported. The measurements behind the
rules and thresholds are in ``bench/README.md``.
"""

from __future__ import annotations

from .choosing import choose, number_named
from .clarification import PENDING_KIND, offer, resume
from .content import QUESTION_CONTENT_MARGIN, as_question, content_fit
from .cue_words import cues, words
from .decision import Route, route, route_ranked
from .masking import (
    name_pattern,
    object_names,
    routed_texts,
    site_name_pattern,
    without_object_names,
    without_site_name,
)
from .query_vectors import embed_query, intent_vector
from .scoring import Scored, nearest_mean, rank
from .site_topic import off_topic, topic, topic_key
from .texts import SITE_EXAMPLES_PER_CAPABILITY, declared_texts, forget_site_examples, site_examples, texts_of
from .topic_requests import names_a_topic
from .vector_cache import cache_key, described, vectors_key

__all__ = [
    "PENDING_KIND",
    "QUESTION_CONTENT_MARGIN",
    "SITE_EXAMPLES_PER_CAPABILITY",
    "Route",
    "Scored",
    "as_question",
    "cache_key",
    "choose",
    "content_fit",
    "cues",
    "declared_texts",
    "described",
    "embed_query",
    "forget_site_examples",
    "intent_vector",
    "name_pattern",
    "names_a_topic",
    "nearest_mean",
    "number_named",
    "object_names",
    "off_topic",
    "offer",
    "rank",
    "resume",
    "route",
    "route_ranked",
    "routed_texts",
    "site_examples",
    "site_name_pattern",
    "texts_of",
    "topic",
    "topic_key",
    "vectors_key",
    "without_object_names",
    "without_site_name",
    "words",
]
