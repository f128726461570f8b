"""Benchmark settings: the test project's apps and URLs, in a database of their own, DEBUG off."""

import os

from agent_handshake.embedded import database_config
from tests.settings import *  # noqa: F403
from tests.settings import ROOT

DATABASES = {"default": database_config(ROOT, name=os.environ.get("BENCH_DATABASE", "agent_handshake_bench"))}
# Persistent connections, as database_config gives a DATABASE_URL deployment: a request should not pay for a new
# PostgreSQL connection (3-8 ms here) in a latency benchmark.
DATABASES["default"].update(CONN_MAX_AGE=60, CONN_HEALTH_CHECKS=True)
INSTALLED_APPS = [*INSTALLED_APPS, "bench.beirapp"]  # noqa: F405
ROOT_URLCONF = "bench.urls"
DEBUG = False

# bench_middleware.py serves the same project without the discovery middleware to compare.
if os.environ.get("BENCH_WITHOUT_AGENT_MIDDLEWARE"):
    MIDDLEWARE = [m for m in MIDDLEWARE if m != "agent_handshake.middleware.AgentDiscoveryMiddleware"]  # noqa: F405

# bench_converse_load.py runs several gunicorn workers: the rate limits must count across them, so it passes a
# shared cache (Redis, when one is reachable) and, for its other runs, lifts the limits and the caches.
if os.environ.get("BENCH_CACHE_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": os.environ["BENCH_CACHE_URL"], "KEY_PREFIX": "bench"}}  # fmt: skip
if os.environ.get("BENCH_RELAXED_LIMITS"):
    AGENT_HANDSHAKE = {
        **AGENT_HANDSHAKE,  # noqa: F405
        "RATE_LIMITS": {"unauthenticated": {"requests": "1000000/minute", "token_budget": "5000/session"}},
        "AGENT_RATE_LIMIT": "1000000/minute",
        "ANSWER_CACHE_TIMEOUT": 0,
        "EMBEDDING_CACHE_SIZE": 0,  # every request embeds its question
    }
# ... and once more with BLAS threads left to numpy (the baseline of MiniLMEmbeddings' blas_threads=1).
if os.environ.get("BENCH_BLAS_THREADS_DEFAULT"):
    AGENT_HANDSHAKE = {**AGENT_HANDSHAKE, "EMBEDDING_OPTIONS": {"blas_threads": None}}
# bench_fuzz.py: the demo site as `make demo` serves it, every limit lifted (its requests share one address).
if os.environ.get("BENCH_FUZZ"):
    from tests.fuzzing import LIFTED_LIMITS

    ROOT_URLCONF = "bench.urls_demo"
    AGENT_HANDSHAKE = {**AGENT_HANDSHAKE, **LIFTED_LIMITS, "SERVE_ROBOTS_TXT": True}
