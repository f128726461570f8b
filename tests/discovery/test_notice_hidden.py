"""The agent notice stays hidden from people on a site whose Content-Security-Policy forbids inline styles
(``style-src 'self'``, as django-csp sets it): a browser then ignores ``style="display:none"``, and only the
``hidden`` attribute, which no policy blocks, keeps the notice off every page people see. §3.4: "display:none or
equivalent"; the notice stays in the raw HTML."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.django_db


class Notices(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section" and dict(attrs).get("class") == "ahp-notice":
            self.found.append(dict(attrs))


def test_the_notice_is_hidden_without_any_style(client):
    parser = Notices()
    parser.feed(client.get("/page/").content.decode())
    assert len(parser.found) == 1
    notice = parser.found[0]
    assert "hidden" in notice  # a boolean attribute: hidden by the browser's own style sheet, whatever CSP says
    assert notice["style"] == "display:none"  # the spec's own markup, for agents that look for it
    assert notice["aria-label"] == "AI Agent Notice"
