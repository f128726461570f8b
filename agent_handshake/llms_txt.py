"""The MODE1 documents: ``/llms.txt`` (the llms.txt convention), ``/llms-full.txt`` and markdown versions.

All three are read from :class:`~agent_handshake.models.Document` rows. ``llms-full.txt`` is produced by a
generator over a server-side cursor, so its memory use does not grow with the number of objects.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from urllib.parse import quote

from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils.crypto import salted_hmac

from . import content_signals
from .conf import app_settings
from .indexing import utc_day
from .models import Document
from .registry import ContentConfig, capability_registry, content_registry
from .state import Snapshot


def _one_line(text: str) -> str:
    return " ".join(text.split())


# Markdown that could turn text into a link, an image, an autolink, HTML or a code span swallowing what follows.
_INLINE_MARKUP = re.compile(r"([\\`\[\]<>])")
#: What a link target cannot hold as it is, percent-encoded (as UTF-8): a space, "<" or ">" ends it, an unbalanced
#: parenthesis closes it, a backslash escapes the character after it (before the closing ")", the link is gone),
#: and control characters are not allowed in it; they and the line separators also end the line, and with it the
#: list item, for a reader that splits lines as Python's ``str.splitlines`` does. "%" is kept: the URL's own %XX
#: escapes are not encoded twice.
_URL_UNSAFE = str.maketrans(
    {
        character: quote(character, safe="")
        for character in (*" ()<>\\", *map(chr, (*range(0x20), *range(0x7F, 0xA0))), "\u2028", "\u2029")
    }
)


def _text(text: str) -> str:
    """Untrusted text (a title, a summary) on one line, as literal markdown: it cannot open a link or a tag."""
    return _INLINE_MARKUP.sub(r"\\\1", _one_line(text))


#: What makes a line a block of its own where text starts it (a blockquote's, a list item's): an ATX heading, a bullet
#: list item, a code fence, a thematic break ("***", "- - -", "___"). Escaped there with a backslash before it.
_BLOCK_MARKER = re.compile(r"#{1,6}(?: |$)|[-+*](?: |$)|~~~|([-*_])(?: *\1){2,} *$")
#: An ordered list item ("1. ", "2) "): the backslash goes before its "." or ")".
_ORDERED_MARKER = re.compile(r"(\d{1,9})([.)])(?= |$)")
#: A heading's closing sequence (" ##" at its end), which a reader drops: escaped, the text keeps it.
_HEADING_CLOSE = re.compile(r"(^| )(#+)$")


def _block_text(text: str) -> str:
    """:func:`_text` where it starts a line's content ("> summary", "- name: ..."): it stays that block's text (a
    summary "# Free tea" or "1. Buy" is no heading or list inside the quote)."""
    text = _text(text)
    if ordered := _ORDERED_MARKER.match(text):
        return f"{ordered.group(1)}\\{text[ordered.end(1) :]}"
    return "\\" + text if _BLOCK_MARKER.match(text) else text


def _heading(level: int, text: str, default: str) -> str:
    """A heading whose text is exactly ``text`` (:func:`_text`; ``default`` when that is empty): a title of only
    spaces is no empty heading, and "Ranked #" keeps its "#"."""
    shown = _HEADING_CLOSE.sub(r"\1\\\2", _text(text)) or default
    return f"{'#' * level} {shown}"


#: Brackets in a link's text as character references: markdown reads them as the brackets, and a reader that
#: takes the text up to the first "]" (the llms.txt convention's own parser) finds none to stop at early.
_BRACKETS = str.maketrans({"[": "&#91;", "]": "&#93;"})
_LINK_TEXT_MARKUP = re.compile(r"([\\`<>])")
#: The name of an item whose title is empty (the convention's file lists need one).
UNTITLED = "Untitled"


def _link(text: str, url: str) -> str:
    """A markdown link whose text and target are exactly these (neither can end early), its text never empty."""
    name = _LINK_TEXT_MARKUP.sub(r"\\\1", _one_line(text)).translate(_BRACKETS) or UNTITLED
    return f"[{name}]({url.translate(_URL_UNSAFE)})"


def document_boundary(snapshot: Snapshot) -> str:
    """The line that starts every document in ``/llms-full.txt``, announced in its header:
    ``<!-- document N -->``, N a keyed hash (Django's ``salted_hmac`` under ``SECRET_KEY``) of the state token.

    A nonce, not a fixed line with look-alikes escaped: a fixed line can be imitated in ways no escaping
    rule foresees (invisible format characters such as U+200B or U+FEFF before it, homoglyphs), and a model
    reading the file ignores them. Content cannot hold this line: it cannot be guessed without ``SECRET_KEY``,
    and a copy taken from an earlier file is stale, since any edit of the content changes the state token."""
    nonce = salted_hmac("agent_handshake.llms_full.document_boundary", snapshot.token).hexdigest()[:16]
    return f"<!-- document {nonce} -->"


def _date(moment: datetime.datetime | None) -> str:
    return utc_day(moment) or ""


#: A URL that names its own scheme and host; any other (a path, "/go/https://tea.example/" included) is the site's.
_ABSOLUTE_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://")


def absolute_url(base_url: str, url: str) -> str:
    return url if _ABSOLUTE_URL.match(url) else base_url + url


def offered(snapshot: Snapshot) -> list[ContentConfig]:
    """The registered models whose documents ``/llms.txt`` and ``/llms-full.txt`` hold, in the registry's order.

    Each file is sent with one ``Content-Signal`` header, the site's: a model whose editor said "no" to a term the
    site says "yes" to (ai-input off for staff notes) is left out, where that header would say "yes" of it. Its pages
    and markdown versions are still served, with its own header."""
    return [
        config
        for config in content_registry
        if not content_signals.stricter(snapshot.signals_for(config.label), than=snapshot.site_signals)
    ]


def render_llms_txt(snapshot: Snapshot, base_url: str) -> str:
    manifest_url = base_url + reverse("agent_handshake:manifest")
    full_url = base_url + reverse("agent_handshake:llms_full_txt")
    lines = [_heading(1, snapshot.name, "This site"), ""]
    if snapshot.description:
        lines += [f"> {_block_text(snapshot.description)}", ""]
    lines += [
        "This site supports the Agent Handshake Protocol (AHP/0.1). "
        f"Capabilities, content signals and endpoints: {manifest_url}. "
        f"Every page's full text: {full_url}. "
        f"Questions in natural language (NLWeb v0.54): POST {base_url + reverse('agent_handshake:nlweb_ask')}."
        + (
            " Intents (bookings, orders, quotes; IntentWeb 1.0): "
            f"{base_url + reverse('agent_handshake:intent_manifest')}. The same capabilities as typed schema "
            "templates (draft-zhou-structured-data-schema-interaction): "
            f"{base_url + reverse('agent_handshake:schema_templates')}."
            if any(c.mode == "MODE3" and c.handler is not None for c in capability_registry.available())
            else ""
        )
        + (
            f" Each page listed below has a markdown version at its URL with `{app_settings.MARKDOWN_SUFFIX}` "
            "appended, or with `Accept: text/markdown`."
            if app_settings.MARKDOWN_VERSIONS
            else ""
        ),
        "",
    ]
    # The format keeps H2 sections for file lists (every line an item ``- [name](url): notes``): the contact details
    # and what each section holds are free text before them, where any markdown but a heading may go.
    if snapshot.contact:
        lines += ["Contact:", ""]
        labels = {"email": "Email", "url": "Contact page", "phone": "Phone", "address": "Address"}
        for key, value in snapshot.contact.items():
            value = absolute_url(base_url, value) if key == "url" and value.startswith("/") else value
            lines.append(f"- {labels.get(key, key.capitalize())}: {_text(value)}")
        lines.append("")
    limit = app_settings.LLMS_TXT_MAX_ITEMS
    sections = []
    for config in offered(snapshot):
        content_type = ContentType.objects.get_for_model(config.model)
        documents = Document.objects.filter(content_type=content_type).order_by("-published_at", "title", "pk")
        total = documents.count()
        if total:
            sections.append((config, documents, total))
    described = [(config.get_section(), config.section_description) for config, _, _ in sections]
    if any(description for _, description in described):
        lines += ["The sections below:", ""]
        lines += [f"- {_block_text(name)}: {_text(description)}" for name, description in described if description]
        lines.append("")
    for config, documents, total in sections:
        lines += [_heading(2, config.get_section(), UNTITLED), ""]
        for url, title, summary in documents.values_list("url", "title", "summary")[:limit]:
            entry = f"- {_link(title, absolute_url(base_url, url))}"
            lines.append(f"{entry}: {_text(summary)}" if summary else entry)
        if total > limit:
            everything = _link(f"All {total} {config.get_section().lower()}", full_url)
            lines.append(f"- {everything}: the full text of every item")
        lines.append("")
    lines += ["## Optional", "", f"- [Full text]({full_url}): every page above in one markdown file", ""]
    return "\n".join(lines)


def render_document(document: Document, base_url: str, section: str = "") -> str:
    """One object as a markdown page: title, summary, a line of metadata, then its body."""
    parts = [_heading(1, document.title, UNTITLED), ""]
    if document.summary:
        parts += [f"> {_block_text(document.summary)}", ""]
    # One line: the URL encoded as in llms.txt's links, the rest as text (a line break would start lines of its own).
    meta = [f"URL: {absolute_url(base_url, document.url).translate(_URL_UNSAFE)}"]
    if section:
        meta.append(f"Section: {_text(section)}")
    if document.published_at:
        meta.append(f"Published: {_date(document.published_at)}")
    if document.schema_type:
        meta.append(f"Type: {_text(document.schema_type)}")
    parts += [" · ".join(meta), ""]
    if document.markdown:
        parts += [document.markdown.strip(), ""]
    return "\n".join(parts)


def iter_llms_full_txt(snapshot: Snapshot, base_url: str) -> Iterator[str]:
    """Yield ``/llms-full.txt`` in pieces: a header, then every document as its markdown page.

    Each document starts with the line :func:`document_boundary`, section by section in the registry's order.
    """
    boundary = document_boundary(snapshot)
    yield f"{_heading(1, snapshot.name, 'This site')}\n\n"
    if snapshot.description:
        yield f"> {_block_text(snapshot.description)}\n\n"
    yield (
        f"Every document below starts with the line `{boundary}`, then its `# title`, its summary and a "
        "line of metadata (URL, section, date, type); no line of a document's text is that line (it changes "
        "whenever the content does).\n\n"
    )
    chunk_size = app_settings.LLMS_FULL_CHUNK_SIZE
    fields = ("url", "title", "summary", "markdown", "published_at", "schema_type")
    for config in offered(snapshot):
        content_type = ContentType.objects.get_for_model(config.model)
        documents = Document.objects.filter(content_type=content_type).order_by("-published_at", "pk")
        section = config.get_section()
        for document in documents.only(*fields).iterator(chunk_size=chunk_size):
            page = render_document(document, base_url, section)
            # A process's snapshot may be up to STATE_TTL seconds older than a save made by another one: text that
            # already holds this boundary is defused (one substring test a document).
            if boundary in page:
                page = page.replace(boundary, "\\" + boundary)
            yield f"{boundary}\n\n{page}\n"
