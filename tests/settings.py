"""Settings for the test suite: the demo site's apps plus a small test app, on the embedded PostgreSQL."""

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

DATABASES = {"default": database_config(ROOT, name="agent_handshake_tests")}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}

USE_TZ = True
STATIC_URL = "/static/"
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AGENT_HANDSHAKE = {
    "SITE_NAME": "Test Site",
    "SITE_DESCRIPTION": "A site the test suite builds.",
}
