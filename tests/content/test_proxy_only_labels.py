"""A site that registers only a proxy of its model, seen through NLWeb's ``itemType`` and the admin's content signal
overrides: both named the proxy by its own label or class where its documents carry the model's, so an
``itemType`` found nothing and the admin refused to save an override for the content type it offered."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from agent_handshake.models import ContentSignalOverride, Document, SiteProfile
from tests.content.test_proxy_only_registration import proxy_site  # noqa: F401 (a fixture)
from tests.nlweb.test_nlweb import ask
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db


def test_an_item_type_finds_the_proxys_documents(proxy_site, client):  # noqa: F811
    schema_type = Document.objects.get(url="/articles/cold-brew/").schema_type
    _, body = ask(client, "How do I cold brew green tea?", query={"itemType": schema_type})
    assert [result["url"] for result in body["results"]] == ["http://testserver/articles/cold-brew/"], body


def test_the_admin_saves_a_signal_override_for_the_registered_proxy(proxy_site):  # noqa: F811
    # The admin offers the content type the proxy's documents carry (the model's: for_concrete_model).
    profile = SiteProfile.objects.create(name="Tea")
    content_type = ContentType.objects.get_for_model(Article)
    override = ContentSignalOverride(profile=profile, content_type=content_type, ai_train=False)
    override.full_clean()
    override.save()
    assert ContentSignalOverride.objects.filter(pk=override.pk).exists()
