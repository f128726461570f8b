"""/llms.txt and /llms-full.txt carry one Content-Signal header, the site's: a registered model whose editor said
"no" to a term the site says "yes" to (ai-input off for one model) must not be in them, where the header would
say "yes" of its content. Its own page and markdown version keep its own header."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from agent_handshake.models import ContentSignalOverride, SiteProfile
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

SITE_HEADER = "search=yes, ai-input=yes, ai-train=no"


@pytest.fixture
def content(publish, video):
    article = publish(
        Article, title="Staff rota", slug="staff-rota", summary="Who opens the shop.", body="Ada opens on Monday."
    )
    return article, video


def override_articles(django_capture_on_commit_callbacks, **signals):
    with django_capture_on_commit_callbacks(execute=True):
        profile = SiteProfile.objects.create(name="Tea shop", ai_train=False, ai_input=True, search=True)
        ContentSignalOverride.objects.create(
            profile=profile, content_type=ContentType.objects.get_for_model(Article), **signals
        )


def full_text(client) -> tuple[str, str]:
    response = client.get("/llms-full.txt")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode(), response["Content-Signal"]


def test_a_model_without_ai_input_is_not_in_llms_full_txt_nor_llms_txt(
    client, content, django_capture_on_commit_callbacks
):
    article, _ = content
    assert client.get(article.get_absolute_url()).status_code == 200
    before, _ = full_text(client)
    assert "Ada opens on Monday." in before  # the model is in the file while it allows AI input
    override_articles(django_capture_on_commit_callbacks, ai_input=False)

    text, header = full_text(client)
    assert header == SITE_HEADER
    assert "Ada opens on Monday." not in text
    assert "Staff rota" not in text
    assert "How to whisk matcha to a fine foam." in text  # the other model is still there
    index = client.get("/llms.txt")
    assert index["Content-Signal"] == SITE_HEADER
    assert "Staff rota" not in index.content.decode()
    assert "Whisking matcha" in index.content.decode()

    # The object's own markdown version still answers, with its own model's signals.
    markdown = client.get("/articles/staff-rota.md")
    assert markdown.status_code == 200
    assert markdown["Content-Signal"] == "search=yes, ai-input=no, ai-train=no"


def test_a_model_stricter_on_any_term_of_the_header_is_left_out(client, content, django_capture_on_commit_callbacks):
    override_articles(django_capture_on_commit_callbacks, search=False)
    text, header = full_text(client)
    assert header == SITE_HEADER
    assert "Ada opens on Monday." not in text
    assert "Staff rota" not in client.get("/llms.txt").content.decode()


def test_a_model_as_open_or_more_open_than_the_site_stays(client, content, django_capture_on_commit_callbacks):
    # ai-train=yes for articles while the site says no: the file's "ai-train=no" is stricter, still true of them.
    override_articles(django_capture_on_commit_callbacks, ai_train=True, attribution_required=False)
    text, header = full_text(client)
    assert header == SITE_HEADER
    assert "Ada opens on Monday." in text
    assert "Staff rota" in client.get("/llms.txt").content.decode()


def test_the_files_stay_as_they_are_when_the_site_itself_says_no(client, content, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        profile = SiteProfile.objects.create(name="Tea shop", ai_train=False, ai_input=False, search=True)
        ContentSignalOverride.objects.create(
            profile=profile, content_type=ContentType.objects.get_for_model(Article), ai_input=False
        )
    text, header = full_text(client)
    assert header == "search=yes, ai-input=no, ai-train=no"
    assert "Ada opens on Monday." in text  # the header says no of the whole file, this model included


def test_the_manifest_asked_for_on_an_objects_page_carries_the_sites_signals(
    client, content, django_capture_on_commit_callbacks
):
    """The manifest states the site's signals; asked for with Accept on an article's URL it had the article
    model's Content-Signal header, contradicting its own content_signals."""
    override_articles(django_capture_on_commit_callbacks, ai_input=False)
    response = client.get(article_url := content[0].get_absolute_url(), headers={"Accept": "application/agent+json"})
    assert response.status_code == 200
    assert response.json()["content_signals"]["ai_input"] is True
    assert response["Content-Signal"] == SITE_HEADER
    assert client.get(article_url)["Content-Signal"] == "search=yes, ai-input=no, ai-train=no"
