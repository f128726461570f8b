"""bench_jobs.py's settings: bench.settings plus the ``bench_echo`` async capability (bench/jobsapp), with the
rate limits lifted (one key sends thousands of requests) and the answer and query-embedding caches off, so every
``site_info`` request, the baseline, embeds its question and retrieves."""

from bench.settings import *  # noqa: F403
from bench.settings import AGENT_HANDSHAKE, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.jobsapp"]

UNLIMITED = "1000000/minute"
AGENT_HANDSHAKE = {
    **AGENT_HANDSHAKE,
    "RATE_LIMITS": {
        "unauthenticated": {"requests": UNLIMITED, "token_budget": "10000000/session"},
        "authenticated": {"requests": UNLIMITED, "token_budget": "10000000/session"},
    },
    "AGENT_RATE_LIMIT": UNLIMITED,
    "ACTION_RATE_LIMIT": UNLIMITED,
    "DAILY_TOKEN_BUDGET_PER_IP": 10**9,
    "ANSWER_CACHE_TIMEOUT": 0,
    "EMBEDDING_CACHE_SIZE": 0,
}

# No remote control: the worker opens no pidbox queues, in Redis or in the filesystem broker's folder.
CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
