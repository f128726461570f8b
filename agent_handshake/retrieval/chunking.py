"""Splitting a document's markdown into passages for retrieval.

Passages follow the markdown structure: a heading starts a new section and every passage remembers the
headings above it; long sections are cut at paragraph, then sentence boundaries, and consecutive passages of
one section overlap by a sentence or two so a fact that straddles a cut is still found whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

#: An ATX heading line; its closing hashes are taken off by :func:`_title` (a lazy title followed by ``\s*#*\s*$``
#: here took cubic time on a heading with a long run of spaces inside: minutes for a few thousand).
HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
FENCE = re.compile(r"^(```|~~~)")
#: Characters of scripts written without spaces between words: CJK punctuation, kana, ideographs, full-width forms;
#: Thai, Lao, Khmer and Myanmar. Each counts as a word (the embedding model reads about one token for each); a run of
#: them was one "word" however long, so a Chinese article was one passage, embedded from its first 256 tokens only.
UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
#: A word: one character of those, or a run of other characters up to white space or one of those.
UNIT = re.compile(f"[{UNSPACED}]|[^{UNSPACED}\\s]+")
HAS_UNSPACED = re.compile(f"[{UNSPACED}]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
#: The same, or at a full-width full stop, exclamation or question mark (white space after it or not).
FULL_WIDTH_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|(?<=[。！？])\s*")


@dataclass(frozen=True)
class Chunk:
    position: int
    heading: str
    text: str


def _title(text: str) -> str:
    """A heading's text without its closing hashes and the white space around them (at least one character)."""
    return text[: max(1, len(text.rstrip().rstrip("#").rstrip()))]


def _spaced(text: str) -> bool:
    return text.isascii() or not HAS_UNSPACED.search(text)


def _words(text: str) -> int:
    return len(text.split()) if _spaced(text) else len(UNIT.findall(text))


def _slices(sentence: str, limit: int) -> list[str]:
    """``sentence`` cut into pieces of at most ``limit`` words."""
    # Slices by index: taking the rest (``words = words[limit:]``) copied it for every piece, which made a long
    # paragraph without a sentence break take time quadratic in its length.
    if _spaced(sentence):
        words = sentence.split()
        return [" ".join(words[start : start + limit]) for start in range(0, len(words), limit)]
    # Cut from the text itself, so that no space comes between characters of a script written without them.
    spans = [match.span() for match in UNIT.finditer(sentence)]
    ends = [spans[min(start + limit, len(spans)) - 1][1] for start in range(0, len(spans), limit)]
    return [sentence[spans[start][0] : end] for start, end in zip(range(0, len(spans), limit), ends, strict=True)]


def _glue(before: str, after: str) -> str:
    """What joins two parts of one paragraph: a space, or nothing next to a character of an unspaced script."""
    return "" if HAS_UNSPACED.match(before[-1:]) or HAS_UNSPACED.match(after[:1]) else " "


def _concat(parts: list[str]) -> str:
    """Sentences of one paragraph put back together."""
    joined = " ".join(parts)
    if not parts or _spaced(joined):
        return joined
    text = parts[0]
    for part in parts[1:]:
        text += _glue(text, part) + part
    return text


def _sentences(text: str) -> list[str]:
    if text.isascii() or not ("。" in text or "！" in text or "？" in text):  # the faster pattern when it will do
        return SENTENCE_END.split(text)
    return [sentence for sentence in FULL_WIDTH_END.split(text) if sentence]


def _sections(markdown: str) -> list[tuple[str, list[str]]]:
    """(heading path, paragraphs) for each section; fenced code stays in one paragraph."""
    sections: list[tuple[str, list[str]]] = []
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    current: list[str] = []
    in_fence = False

    def close_paragraph() -> None:
        if current:
            paragraph = "\n".join(current).strip()
            if paragraph:
                paragraphs.append(paragraph)
            current.clear()

    def close_section() -> None:
        close_paragraph()
        if paragraphs:
            sections.append((" > ".join(title for _, title in path), list(paragraphs)))
            paragraphs.clear()

    for line in markdown.splitlines():
        if FENCE.match(line.strip()):
            in_fence = not in_fence
            current.append(line)
            continue
        if in_fence:
            current.append(line)
            continue
        heading = HEADING.match(line)
        if heading:
            close_section()
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, _title(heading.group(2))))
        elif not line.strip():
            close_paragraph()
        else:
            current.append(line)
    close_section()
    return sections


def _pieces(paragraph: str, limit: int) -> list[str]:
    """A paragraph as pieces of at most ``limit`` words (cut at sentences, then at words)."""
    if _words(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _sentences(paragraph):
        pieces.extend(_slices(sentence, limit))
    return pieces


def split_markdown(markdown: str, *, max_words: int = 160, overlap_words: int = 30) -> list[Chunk]:
    """Passages of at most about ``max_words`` words; neighbours in a section share ``overlap_words``."""
    passages: list[Chunk] = []
    for heading, paragraphs in _sections(markdown):
        # (paragraph number, piece): pieces of one paragraph are joined by a space, paragraphs by a blank line.
        pieces = [
            (number, piece) for number, paragraph in enumerate(paragraphs) for piece in _pieces(paragraph, max_words)
        ]
        chunk: list[tuple[int, str]] = []
        for number, piece in pieces:
            if chunk and _words(" ".join(text for _, text in chunk)) + _words(piece) > max_words:
                passages.append(Chunk(len(passages), heading, _join(chunk)))
                # Carry the tail of the previous passage over, whole sentences where possible.
                tail: list[str] = []
                for sentence in reversed(_sentences(chunk[-1][1])):
                    if _words(_concat([sentence, *tail])) > overlap_words:
                        break
                    tail.insert(0, sentence)
                chunk = [(chunk[-1][0], _concat(tail))] if tail else []
            chunk.append((number, piece))
        if chunk:
            passages.append(Chunk(len(passages), heading, _join(chunk)))
    return passages


def _join(pieces: list[tuple[int, str]]) -> str:
    text = pieces[0][1]
    for (previous, _), (number, piece) in pairwise(pieces):
        text += (_glue(text, piece) if number == previous else "\n\n") + piece
    return text
