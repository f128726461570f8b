"""Benchmark settings: the test project's apps and URLs, in a database of their own, DEBUG off."""

import os

from agent_handshake.embedded import database_config
from tests.settings import *  # noqa: F403
from tests.settings import ROOT

DATABASES = {"default": database_config(ROOT, name=os.environ.get("BENCH_DATABASE", "agent_handshake_bench"))}
INSTALLED_APPS = [*INSTALLED_APPS, "bench.beirapp"]  # noqa: F405
ROOT_URLCONF = "bench.urls"
DEBUG = False

# bench_middleware.py serves the same project without the discovery middleware to compare.
if os.environ.get("BENCH_WITHOUT_AGENT_MIDDLEWARE"):
    MIDDLEWARE = [m for m in MIDDLEWARE if m != "agent_handshake.middleware.AgentDiscoveryMiddleware"]  # noqa: F405
