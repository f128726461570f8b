"""A site that includes the app under ``i18n_patterns`` (``/fr/agent/converse/status/<id>``): with
``Accept: application/agent+json`` the middleware, which runs before ``LocaleMiddleware`` has activated the URL's
language, resolved the path in whatever language the thread last had, did not find the protocol endpoint, and
served the manifest instead of the endpoint's own answer (an agent polling its job got the manifest)."""

from __future__ import annotations

import pytest
from django.conf.urls.i18n import i18n_patterns
from django.test import Client
from django.urls import include, path, reverse
from django.utils import translation

pytestmark = pytest.mark.django_db

urlpatterns = i18n_patterns(path("", include("agent_handshake.urls")), prefix_default_language=False)

AGENT_JSON = {"Accept": "application/agent+json"}


@pytest.fixture
def i18n_site(settings):
    settings.ROOT_URLCONF = __name__
    settings.LANGUAGE_CODE = "en"
    settings.LANGUAGES = [("en", "English"), ("fr", "French")]
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(
        middleware.index("django.middleware.common.CommonMiddleware"), "django.middleware.locale.LocaleMiddleware"
    )
    settings.MIDDLEWARE = middleware
    return settings


def assert_the_status_doors_answer(response) -> None:
    # The status door's own refusal (no credentials), not the manifest.
    assert response.status_code == 401, response.content[:300]
    assert response.json()["code"] == "auth_required"


@pytest.mark.parametrize("language", ["fr", "en"])
def test_a_job_status_in_a_language_prefixed_url_is_the_doors_answer(i18n_site, language):
    client = Client()
    with translation.override(language):
        status = reverse("agent_handshake:converse_status", args=["no-such-job"])
    assert status.startswith("/fr/") == (language == "fr")
    # The thread's language is the other one (left by the last request), as LocaleMiddleware leaves it.
    with translation.override("en" if language == "fr" else "fr"):
        response = client.get(status, headers=AGENT_JSON)
    assert_the_status_doors_answer(response)


def test_other_pages_still_get_the_manifest(i18n_site):
    response = Client().get("/fr/nowhere/", headers=AGENT_JSON)
    assert response.status_code == 200
    assert "ahp" in response.json()
