"""A title, a summary or the site's description re-emitted as markdown stays the one block it is written into.

A summary beginning with "#", "-", "1." or "~~~" became a heading, a list or a code fence inside the markdown
version's blockquote ("> # ..."), and so did the site's description in ``/llms.txt``; a title of only spaces became an
empty heading ("# "), and one ending in " #" lost its "#" (a heading's closing sequence). They are read with a
CommonMark parser, as an agent's would."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from agent_handshake.models import SiteProfile
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

SUMMARIES = [
    "# Free tea for agents",
    "###### Six",
    "- a list item",
    "+ another",
    "* and another",
    "1. first",
    "2) second",
    "---",
    "***",
    "_ _ _",
    "~~~ python",
    "``` python",
    "> nested",
    "<div>raw</div>",
    "#hashtag-like start",
    "12345678. a big number",
]


def blocks(text: str) -> list[tuple[str, str]]:
    """(token type, inline text) of the top-level and nested blocks a CommonMark reader finds, in order."""
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "inline":
            found[-1] = (found[-1][0], token.content)
        elif token.nesting != -1:
            found.append((token.type if token.tag != "h1" else "h1", ""))
    return found


def unescaped(text: str) -> str:
    """What a reader shows of inline text: the rendered paragraph without its tags."""
    return MarkdownIt("commonmark").renderInline(text)


@pytest.mark.parametrize("summary", SUMMARIES)
def test_a_summary_is_one_paragraph_of_the_markdown_versions_blockquote(client, publish, summary):
    publish(Article, title="A note", slug="note", summary=summary, body="Tea.")
    response = client.get("/articles/note.md")
    assert response.status_code == 200
    found = blocks(response.content.decode())
    assert found[0] == ("h1", "A note")
    assert found[1][0] == "blockquote_open", found
    assert found[2][0] == "paragraph_open", found
    assert unescaped(found[2][1]) == summary.replace("<", "&lt;").replace(">", "&gt;")
    assert found[3][0] == "paragraph_open", found  # the metadata line, out of the quote


@pytest.mark.parametrize(("title", "shown"), [("   ", "Untitled"), ("Ranked #", "Ranked #"), ("# Tea", "# Tea")])
def test_a_title_is_the_markdown_versions_heading_as_written(client, publish, title, shown):
    publish(Article, title=title, slug="titled", summary="", body="Tea.")
    response = client.get("/articles/titled.md")
    assert response.status_code == 200
    found = blocks(response.content.decode())
    assert found[0][0] == "h1"
    assert unescaped(found[0][1]) == shown


@pytest.mark.parametrize("description", ["# Not a heading", "- not a list", "1. not a list either"])
def test_the_site_description_is_one_paragraph_of_llms_txt_blockquote(client, description):
    SiteProfile.objects.create(name="Tea shop", description=description)
    for path in ("/llms.txt", "/llms-full.txt"):
        response = client.get(path)
        text = b"".join(response.streaming_content) if response.streaming else response.content
        found = blocks(text.decode())
        assert found[0] == ("h1", "Tea shop"), path
        assert [kind for kind, _ in found[1:3]] == ["blockquote_open", "paragraph_open"], (path, found)
        assert unescaped(found[2][1]) == description, path
