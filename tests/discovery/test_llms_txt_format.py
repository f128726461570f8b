"""llms.txt as the llms.txt convention's own parser reads it (AnswerDotAI/llms-txt, llms_txt/miniparse.py): a
list item is ``- [name](url): notes``, the name anything but ``]``, the URL anything but ``)``."""

from __future__ import annotations

import re

import pytest

from agent_handshake.llms_txt import absolute_url
from tests.discovery.test_mode1_documents import FORGED_TITLE, links_in
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

#: The reference parser's pattern for an item of a file list.
LINK = re.compile(r"-\s*\[(?P<title>[^\]]+)\]\((?P<url>[^\)]+)\)(?::\s*(?P<desc>.*))?")


def items(text: str, section: str) -> list[dict]:
    """The items of one ``## section``, each line read with the reference parser's pattern (which fails on a
    line it cannot read: ``re.search(...)`` is None)."""
    lines = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [LINK.search(line).groupdict() for line in lines.splitlines() if line.startswith("- ")]


def test_a_title_with_brackets_or_no_text_is_one_item_with_its_own_url(client, publish):
    """The backslash that kept a title's ``]`` from closing the link text is markdown's; a reader that takes
    the name up to the first ``]`` (the convention's parser) read the forged title's link to evil.example as the
    item's, and a title of only white space was an item with no name, which it cannot read at all."""
    publish(Article, title=FORGED_TITLE, slug="forged", summary="Tea.", body="Tea.")
    publish(Article, title=" \n\t", slug="blank", body="Tea.")
    text = client.get("/llms.txt").content.decode()
    listed = items(text, "Articles")
    assert sorted(item["url"] for item in listed) == ["http://testserver/articles/blank/",
                                                      "http://testserver/articles/forged/"]  # fmt: skip
    assert not any("evil.example" in item["url"] for item in listed)
    # A markdown reader still reads the title as it is written.
    assert (FORGED_TITLE, "http://testserver/articles/forged/") in links_in(text)


def read_as_the_format_says(text: str) -> dict:
    """llms.txt read as llmstxt.org defines it: an H1, an optional blockquote, then markdown of any kind but
    headings, then H2 sections each holding a file list, every item of which is ``- [name](url)`` with optional
    ``: notes``. A line of an H2 section that is not such an item is a format error (the convention's parser
    fails on the whole file)."""
    head, *rest = re.split(r"^##\s*(.*?)$", text, flags=re.MULTILINE)
    lines = head.strip().splitlines()
    assert lines[0].startswith("# "), lines[0]
    assert not any(line.startswith("#") for line in lines[1:]), "only the H1 heads the part before the lists"
    sections = {}
    for name, body in zip(rest[::2], rest[1::2], strict=True):
        entries = [line for line in body.splitlines() if line.strip()]
        malformed = [line for line in entries if not LINK.fullmatch(line)]
        assert not malformed, f"## {name} holds lines that are not file-list items: {malformed}"
        sections[name] = [LINK.fullmatch(line).groupdict() for line in entries]
    return {"title": lines[0][2:], "info": "\n".join(lines[1:]), "sections": sections}


def test_every_section_is_a_file_list_and_contact_and_section_notes_come_before_them(client, publish):
    """The contact details and each model's ``section_description`` were lines inside H2 sections, which the
    format keeps for file lists: the convention's parser failed on the whole file of every site with a contact
    email. They are now in the free text before the lists."""
    from agent_handshake.models import SiteProfile

    SiteProfile.objects.create(
        name="Lantern & Kettle", description="Tea shop.", contact_email="hi@example.com", contact_phone="+1 555 0100"
    )
    publish(Article, title="Shading gyokuro", slug="shading", summary="Why.", body="Tea.")
    parsed = read_as_the_format_says(client.get("/llms.txt").content.decode())
    assert list(parsed["sections"]) == ["Articles", "Optional"]
    assert parsed["sections"]["Articles"][0]["url"] == "http://testserver/articles/shading/"
    assert "hi@example.com" in parsed["info"]
    assert "+1 555 0100" in parsed["info"]
    assert "Articles: Test articles." in parsed["info"]  # the test app's section_description


#: Object URLs holding what ends or bends a markdown link target: a backslash escapes the ``)`` that closes it (or
#: the character after it), spaces, angle brackets and parentheses end it, line separators end the line for a
#: reader that splits lines as Python does. ``%25`` and ``%41`` are escapes already, to be kept as they are.
HOSTILE_URLS = [
    "/articles/tea\\",
    "/articles/green\\)tea",
    "/articles/tea\\\\pot",
    "/articles/(tea",
    "/articles/tea) [x](y",
    "/articles/<tea>",
    "/articles/50%25 off",
    "/articles/%41\u2028## Optional\x85",
    "https://cdn.example/tea\\",
]


def test_urls_that_would_break_a_link_target_are_percent_encoded_once(client, publish, registries):
    """A backslash in an object's URL was copied into the link target, where markdown reads it as an escape: at
    the URL's end it swallowed the ``)`` and the item was no link at all, before another one it vanished. Every
    reader now finds each item's own URL, percent-encoded, and escapes that were there are not encoded again."""
    from urllib.parse import unquote

    from tests.testapp.agents import ArticleContent

    class URLAsSlug(ArticleContent):
        def get_url(self, obj):  # as a get_absolute_url() that returns the slug would
            return obj.slug

    content_registry, _ = registries
    content_registry.unregister(Article)
    content_registry.register(Article, URLAsSlug)
    for number, url in enumerate(HOSTILE_URLS):
        publish(Article, title=f"Tea {number} \\", slug=url, body="Tea.")
    text = client.get("/llms.txt").content.decode()
    titles = [f"Tea {number} \\" for number in range(len(HOSTILE_URLS))]
    expected = sorted(
        zip(titles, [unquote(absolute_url("http://testserver", url)) for url in HOSTILE_URLS], strict=True)
    )
    listed = items(text, "Articles")
    assert all(set(item["url"]).isdisjoint(" \\()<>\u2028\x85") for item in listed), listed
    # The reference parser reads the title as written, with the backslash escape markdown gives it.
    assert sorted((item["title"].replace("\\\\", "\\"), unquote(item["url"])) for item in listed) == expected
    links = [
        (title, unquote(href)) for title, href in links_in(text) if href.startswith(("http://testserver/a", "https"))
    ]
    assert sorted(links) == expected
