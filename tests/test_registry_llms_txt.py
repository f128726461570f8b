"""llms.txt as the llms.txt convention's own parser reads it (AnswerDotAI/llms-txt, llms_txt/miniparse.py): a
list item is ``- [name](url): notes``, the name anything but ``]``, the URL anything but ``)``."""

from __future__ import annotations

import re

import pytest

from tests.test_mode1_documents import FORGED_TITLE, links_in
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
