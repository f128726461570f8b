"""Settings of the demo site: a small tea shop and blog that uses agent_handshake the way any site would.

With DATABASE_URL unset it runs on the embedded PostgreSQL in ``.pgdata/`` (started on demand).
"""

import os
import sys
from pathlib import Path

from agent_handshake.embedded import database_config

BASE_DIR = Path(__file__).resolve().parent.parent

DEMO_SECRET_KEY = "demo-only-not-secret-3b9f1c2e7a"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEMO_SECRET_KEY)
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")

# The defaults are for 127.0.0.1 only: with DEBUG on, demo_load creates admin/admin and an API key with every
# scope whose secret follows from this public SECRET_KEY (the README prints it). Served for real, say so loudly.
_served_beyond_this_machine = bool(set(ALLOWED_HOSTS) - {"127.0.0.1", "localhost", "[::1]"})
_unsafe = []
if DEBUG and _served_beyond_this_machine:
    _unsafe.append("DEBUG is on (DJANGO_DEBUG=0 turns it off)")
if SECRET_KEY == DEMO_SECRET_KEY and (not DEBUG or _served_beyond_this_machine):
    _unsafe.append("SECRET_KEY is the demo's public one (set DJANGO_SECRET_KEY)")
if _unsafe:
    sys.stderr.write(
        "\nWARNING: demo_site.settings is not safe to deploy: "
        + "; ".join(_unsafe)
        + ". These settings are for a demo on 127.0.0.1; the admin/admin login and the demo API key with every "
        "scope (created with DEBUG on) work for anyone who read the README.\n\n"
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "health_check",  # the HTML page of GET /health/
    "agent_handshake",
    "demo_site.blog",
    "demo_site.pages",
    "demo_site.videos",
    "demo_site.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "agent_handshake.middleware.AgentDiscoveryMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

WSGI_APPLICATION = "demo_site.wsgi.application"

DATABASES = {"default": database_config(BASE_DIR, name="agent_handshake_demo")}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "demo",
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "America/Los_Angeles"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
# The human desk emails these operators about agents' escalations (printed by the worker in the demo).
MANAGERS = [("Lantern & Kettle desk", "desk@lanternkettle.example")]

AGENT_HANDSHAKE = {
    "SITE_NAME": "Lantern & Kettle",
    "SITE_DESCRIPTION": "An independent tea shop and tea blog in Portland, Oregon: brewing guides, videos and "
    "a shop of loose-leaf teas and teaware.",
    "SERVE_ROBOTS_TXT": True,
    # The load balancer's probes: no discovery headers, no database read before the checks report.
    "EXEMPT_PATHS": [r"^/health/"],
    # The intent page (/intent-ui/) books tastings and tracks orders for visitors, with the site's own key.
    "INTENT_UI_SCOPES": ["book_appointment", "orders"],
    # Verified agents (POST /agent/handshake) that earned a trust of 0.7 may book tastings without an API key.
    "DID_TRUST_TIERS": [
        {"name": "trusted", "min_trust": 0.7, "rate_limits": "authenticated", "scopes": ["book_appointment"]},
        {"name": "verified", "min_trust": 0.3, "rate_limits": "authenticated", "scopes": []},
        {"name": "probation", "min_trust": 0.0, "rate_limits": "unauthenticated", "scopes": []},
    ],
    # The demo opts in to keeping agents' questions (redacted) with the traffic records: the admin's agent pages
    # and the content gaps show them. Off by default; a site should say so in its privacy notice when it turns it on.
    "INSIGHTS_RECORD_QUESTIONS": True,
}

# Celery. With no CELERY_BROKER_URL the broker is kombu's filesystem transport in .queue/ (no service to run;
# one machine only). Production: CELERY_BROKER_URL=redis://... or amqp://... (see the README).
# QUEUE_DIR holds the demo's own files (that queue, beat's schedule): one per demo, outside a read-only checkout.
QUEUE_DIR = Path(os.environ.get("AGENT_HANDSHAKE_QUEUE_DIR", BASE_DIR / ".queue"))
CELERY_BEAT_SCHEDULE_FILENAME = str(QUEUE_DIR / "celerybeat-schedule")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem"):
    QUEUE_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(QUEUE_DIR),
        "data_folder_out": str(QUEUE_DIR),
        "control_folder": str(QUEUE_DIR / "control"),  # kombu's default is ./control
        "polling_interval": 0.1,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "agent-handshake-cleanup-sessions": {"task": "agent_handshake.cleanup_sessions", "schedule": 300.0},
    # Re-sends async jobs and callbacks whose messages were lost, expires unanswered desk requests.
    "agent-handshake-recover-jobs": {"task": "agent_handshake.recover_jobs", "schedule": 15.0},
    # Aggregates the agent traffic of closed days and purges raw records past INSIGHTS_RETENTION_DAYS; hourly, so a
    # day is aggregated within the hour after it ends (a run with nothing to do is one small query).
    "agent-handshake-insights-daily": {"task": "agent_handshake.insights_daily", "schedule": 3600.0},
    "agent-handshake-update-content-gaps": {"task": "agent_handshake.update_content_gaps", "schedule": 3600.0},
}
