from __future__ import annotations

import pytest
from django.test import Client, override_settings


@pytest.fixture
def documents_client():
    """A client as a browser's page or an agent is (CSRF checked: no cookie nor token), of a site that serves all
    its public documents, robots.txt too."""
    with override_settings(AGENT_HANDSHAKE={"SERVE_ROBOTS_TXT": True}):
        yield Client(enforce_csrf_checks=True)


@pytest.fixture
def video(publish):
    """A published video, with subtitles and chapters."""
    from demo_site.videos.models import Video

    return publish(
        Video,
        title="Whisking matcha",
        slug="whisking-matcha",
        description="How to whisk matcha to a fine foam.",
        stream_url="https://media.example/whisk/master.m3u8",
        duration_seconds=312,
        subtitles=[{"lang": "en", "url": "https://media.example/whisk/en.vtt"}],
        chapters=[{"title": "Sifting", "start_seconds": 0}, {"title": "Whisking", "start_seconds": 95}],
    )
