"""Settings for the test suite: the demo site's apps plus a small test app, on the embedded PostgreSQL."""

import os
from pathlib import Path

from agent_handshake.embedded import database_config

ROOT = Path(__file__).resolve().parent.parent

SECRET_KEY = "tests-not-secret"
DEBUG = False

ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1", "agents.example"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "agent_handshake",
    "demo_site.blog",
    "demo_site.pages",
    "demo_site.videos",
    "demo_site.shop",
    "tests.testapp",
]

MIDDLEWARE = [
    "django.middleware.gzip.GZipMiddleware",
    "agent_handshake.middleware.AgentDiscoveryMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [ROOT / "tests" / "templates", ROOT / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Worker processes started by the tests are pointed at the test database with AGENT_HANDSHAKE_DB_NAME.
DATABASES = {"default": database_config(ROOT, name=os.environ.get("AGENT_HANDSHAKE_DB_NAME", "agent_handshake_tests"))}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}

USE_TZ = True
STATIC_URL = "/static/"
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AGENT_HANDSHAKE = {
    "SITE_NAME": "Test Site",
    "SITE_DESCRIPTION": "A site the test suite builds.",
    # Index in the request, on commit: most tests need no worker. tests/content/test_celery_worker.py runs a real one.
    "INDEX_ON_SAVE": "sync",
    # Callback receivers in the tests listen on 127.0.0.1 over plain HTTP; tests of the SSRF rules override these.
    "CALLBACK_ALLOWED_NETWORKS": ["127.0.0.1/32"],
    "CALLBACK_REQUIRE_HTTPS": False,
    "CALLBACK_BACKOFF_SECONDS": 0.2,
    # /intent-ui/ may book (tests/browser/test_pages.py books an appointment in a real browser).
    "INTENT_UI_SCOPES": ["book_appointment"],
    # The schema templates' pool is clustered after every fragment (tests/schema_templates/test_schema_templates.py
    # tests the interval).
    "SCHEMA_POOL_UPDATE_SECONDS": 0,
    # Agent traffic insights: no writer thread, whose commits would escape the tests' transactions; recorded requests
    # are written by recording.flush() on the test's connection. A server a test starts may set the interval (env).
    "INSIGHTS_FLUSH_SECONDS": float(os.environ.get("AGENT_HANDSHAKE_INSIGHTS_FLUSH_SECONDS", "0")),
}
# ... which is what W005 warns about outside DEBUG: expected here.
SILENCED_SYSTEM_CHECKS = ["agent_handshake.W005"]

# Celery: the demo's app (demo_site/celery.py) on a filesystem broker in a folder of this test run. Saves in
# tests that switch INDEX_ON_SAVE back to "celery" only queue files; tests/content/test_celery_worker.py starts real
# workers.
import tempfile  # noqa: E402

CELERY_BROKER_URL = os.environ.get("AGENT_HANDSHAKE_TEST_BROKER", "filesystem://")
QUEUE_DIR = Path(os.environ.get("AGENT_HANDSHAKE_QUEUE_DIR") or tempfile.mkdtemp(prefix="agent-handshake-queue-"))
if CELERY_BROKER_URL.startswith("filesystem"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(QUEUE_DIR),
        "data_folder_out": str(QUEUE_DIR),
        "control_folder": str(QUEUE_DIR / "control"),  # kombu's default is ./control
        "polling_interval": 0.05,
    }
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("AGENT_HANDSHAKE_TEST_QUEUE", "agent-handshake-tests")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Worker processes write their emails (the human desk's notices) where the test can read them.
MANAGERS = [("Desk", "desk@example.com")]
if os.environ.get("AGENT_HANDSHAKE_TEST_EMAIL_DIR"):
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = os.environ["AGENT_HANDSHAKE_TEST_EMAIL_DIR"]

# tests/nlweb/test_live_servers.py points its servers' answers at a local OpenAI-compatible model
# (tests/fake_openai.py).
if os.environ.get("AGENT_HANDSHAKE_TEST_ANSWER_URL"):
    AGENT_HANDSHAKE["ANSWER_BACKEND"] = "agent_handshake.concierge.backends.OpenAIAnswerer"
    AGENT_HANDSHAKE["ANSWER_OPTIONS"] = {
        "base_url": os.environ["AGENT_HANDSHAKE_TEST_ANSWER_URL"],
        "api_key": "test",
        "model": "test-model",
        "max_retries": 0,
    }

# tests/openapi/test_fuzz.py sends hundreds of generated requests to one server: the limits are not under test there.
if os.environ.get("AGENT_HANDSHAKE_TEST_SITE_PRIVATE_KEY"):
    # A live server whose site key does not load (tests/browser/test_pages.py: the intent page facing a 503).
    AGENT_HANDSHAKE["SITE_PRIVATE_KEY"] = os.environ["AGENT_HANDSHAKE_TEST_SITE_PRIVATE_KEY"]
if os.environ.get("AGENT_HANDSHAKE_TEST_NO_LIMITS"):
    AGENT_HANDSHAKE["RATE_LIMITS"] = {
        "unauthenticated": {"requests": "100000/minute"},
        "authenticated": {"requests": "100000/minute"},
    }
    AGENT_HANDSHAKE["ACTION_RATE_LIMIT"] = "100000/minute"

# tests/browser/test_pages.py opens the API reference in a real browser, on a server started with this set.
if os.environ.get("AGENT_HANDSHAKE_TEST_API_DOCS"):
    AGENT_HANDSHAKE["API_DOCS"] = True
