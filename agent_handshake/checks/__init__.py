"""System checks: ``manage.py check`` reports misconfiguration with an id and a hint.

Most of what a site configures is read lazily (at the first request, save or search that needs it), so a mistake
would surface as a 500 in front of an agent, or as content agents silently never see. The checks name it when the
site starts instead. Each module checks one part of a site's setup and registers its checks with Django when it is
imported; ``apps.py`` imports this package, which imports every module:

- :mod:`.settings`: the ``AGENT_HANDSHAKE`` dict, its keys and the type of each value (E001, W001, E002)
- :mod:`.setting_values`: each value's range and form, once the types are right (E002)
- :mod:`.installation`: the middleware and the URLs a site adds to install the app (W002, W003, W004)
- :mod:`.registrations`: the registered content and each config's options (E003-E006, E015, E017, E018)
- :mod:`.capabilities`: the registered capabilities' declarations and authentication (E007-E009, W006, W007)
- :mod:`.databases`: PostgreSQL, pgvector and the text search configuration (E010, E014)
- :mod:`.backends`: the embedding and answer backends, their packages and options (E011, E012, E019, W009)
- :mod:`.reader`: the reader model's runtime and files (W010)
- :mod:`.callbacks`: the test-only settings that weaken callbacks' SSRF protection (W005)
- :mod:`.caches`: the caches the rate limits and token budgets count in (E016, W008)
- :mod:`.site_key`: the site's signing key (E013)

=====================  ====================================================================================
``agent_handshake.E001``  ``AGENT_HANDSHAKE`` is not a dict
``agent_handshake.W001``  ``AGENT_HANDSHAKE`` has a key the app does not know (a typo?)
``agent_handshake.E002``  a setting has the wrong type or value
``agent_handshake.W002``  the discovery middleware is not in ``MIDDLEWARE``
``agent_handshake.W003``  the discovery middleware runs before ``GZipMiddleware`` compresses (order)
``agent_handshake.E003``  a model is registered twice
``agent_handshake.E004``  a registered config names a model attribute that does not exist (get_absolute_url too)
``agent_handshake.E005``  a registered config has an unknown AHP content type
``agent_handshake.E006``  a registered config lacks payload fields its content type requires
``agent_handshake.E007``  two capabilities share a name
``agent_handshake.E008``  a capability's declaration is invalid (name, mode, action type, response types)
``agent_handshake.E009``  an ``action``/``async`` capability can be invoked without authentication
``agent_handshake.E010``  the database is not PostgreSQL, or its server has no pgvector (0.5+)
``agent_handshake.W004``  ``agent_handshake.urls`` is not included in the URLconf
``agent_handshake.E011``  the embedding backend cannot be imported, or its model package is not installed
``agent_handshake.E012``  the answer backend cannot be imported, or the ``openai`` package is not installed
``agent_handshake.W005``  outside DEBUG, callbacks may reach private networks or plain HTTP (test settings)
``agent_handshake.E013``  the site's signing key (``SITE_PRIVATE_KEY`` or ``SITE_KEY_FILE``) does not load
``agent_handshake.E014``  ``SEARCH_CONFIG`` names a text search configuration the database does not have
``agent_handshake.W006``  a capability's input declares ``other``, the key schema templates keep for free text
``agent_handshake.E015``  a registered config's ``order`` is not a number
``agent_handshake.W007``  a site's capability replaces a built-in or generated one of the same name
``agent_handshake.W008``  outside DEBUG, ``CACHE_ALIAS`` or ``RATELIMIT_USE_CACHE`` is a cache whose counters are
                          not atomic, or not kept
``agent_handshake.E016``  ``CACHE_ALIAS`` or ``RATELIMIT_USE_CACHE`` names no cache in ``CACHES``
``agent_handshake.E017``  two registered models share one table (a model and its proxy, or two proxies of it)
``agent_handshake.E018``  a registered config's ``follow`` names a path that is not a relation path from its model
``agent_handshake.E019``  ``ANSWER_OPTIONS`` or ``EMBEDDING_OPTIONS`` has an option the backend does not take, or a
                          value of the wrong type or out of range
``agent_handshake.W009``  ``ANSWER_OPTIONS`` is set but ``ANSWER_BACKEND`` is empty: the options are ignored
``agent_handshake.W010``  no reader model (onnxruntime or the model files missing): answers fall back to word scores
=====================  ====================================================================================

Every check function can be imported from this package as well as from its module.
"""

from __future__ import annotations

from .backends import check_backend_options, check_backends
from .caches import check_cache
from .callbacks import check_callbacks
from .capabilities import check_capabilities
from .databases import check_database, check_search_config, check_vector_extension
from .installation import check_middleware, check_urls
from .reader import check_reader
from .registrations import check_registry
from .settings import check_settings
from .site_key import check_site_key

__all__ = [
    "check_backend_options",
    "check_backends",
    "check_cache",
    "check_callbacks",
    "check_capabilities",
    "check_database",
    "check_middleware",
    "check_reader",
    "check_registry",
    "check_search_config",
    "check_settings",
    "check_site_key",
    "check_urls",
    "check_vector_extension",
]
