"""Extractive answers: the sentence that answers the question first, then a sentence or two of support.

The retrieved passages are markdown. They are cut into *units*, each one readable on its own: a sentence of
prose, a list item without its marker, or a table row read with its header ("Fukamushi (deep steamed): steaming
time about 1-2 min, leaf broken, fine"); headings and emphasis markers are dropped, and numbers keep their units
and ranges. Each unit is scored against the question:

- the question's content words it holds, each weighted by how rare it is among the candidate units (a word every
  passage repeats, the topic itself, says little about which sentence answers); the words of a page's title count
  for each of its units alike, so the page's sentence that says what is asked leads, not the one restating the topic;
- what the question asks for: a temperature, a duration, an amount, a price, a date or a year; a unit that holds
  one of those, when asked, is worth two shared words;
- its passage's rank (the retriever's order breaks near-ties) and a penalty for fragments and run-on units.

The answer leads with the best unit; the unit that follows it in its passage comes next when it continues the same
thought (a short sentence, or one sharing a content word), then the next best unit from another source, within the
word budget (about 60 words by default; ``context.max_tokens`` bounds it). Each source's units are followed by its
``[n]`` citation.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
STOPWORDS = frozenset(
    "a about an and are as at be been but by can could did do does for from had has have how i if in into is it "
    "its me more my no not of on or our please should so tell than that the their them then there these they "
    "this those to us was we were what when where which who why will with would you your "
    # Determiners: "from one cup to another" is not about the number one.
    "all another any each every one some".split()
)
#: Words that say what kind of answer is wanted ("how long"), not what it is about.
QUESTION_WORDS = frozenset({"much", "many", "long"})
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[*_])")
LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
HEADING = re.compile(r"^\s*#{1,6}\s")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
EMPHASIS = re.compile(r"(\*{1,3}|_{1,3}|`+)(?=\S)(.+?)(?<=\S)\1")
STRAY_MARKERS = re.compile(r"(?<![\w*])[*_`]+|[*_`]+(?![\w*])")
SPACES = re.compile(r"[ \t]+")

NUMBER = r"\d+(?:[.,]\d+)?(?:\s*[–-]\s*\d+(?:[.,]\d+)?)?"
#: What a question asks for, and what a unit holding it looks like.
DURATION = (
    rf"{NUMBER}\s*(s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?)\b"
    r"|\b(one|two|three|four|five|six|seven|eight|nine|ten|twenty)\s+(seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b"
)
AMOUNT = (
    rf"{NUMBER}\s*(%|g|kg|mg|ml|l|litres?|liters?|cm|mm|m|oz|grams?|cups?|pieces?|seats?|teas?)\b"
    r"|\$\s*\d|\b(ten|twenty|one|two|three)[- ]\w+"
)
MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
STREET = r"\b\d{1,5}\s+([NSEW]{1,2}\s+)?[A-Z][a-z]+\s+(St|Street|Ave|Avenue|Rd|Road|Blvd|Lane|Way)\b"
ASKS = (
    (re.compile(r"\b(how hot|temperature|how warm|how cool|degrees?)\b"), re.compile(rf"{NUMBER}\s*°\s*[CF]\b")),
    (re.compile(r"\b(how long|how many (minutes|hours|days|weeks|months|years)|duration)\b"), re.compile(DURATION)),
    (re.compile(r"\b(percent|percentage|proportion)\b"), re.compile(rf"{NUMBER}\s*%")),
    (re.compile(r"\b(how much|how many|amount|quantity|ratio|size|weigh|weight|big)\b"), re.compile(AMOUNT)),
    (re.compile(r"\b(price|cost|costs|how much does|how much is|charge|fee)\b"),
     re.compile(r"\$\s*\d|\b\d+\s*(dollars|usd)\b")),
    (re.compile(r"\b(when|what year|which year|what date|since when)\b"),
     re.compile(rf"\b(1[5-9]\d\d|20\d\d)s?\b|\b({MONTHS})\b", re.IGNORECASE)),
    (re.compile(r"\b(address|where is)\b"), re.compile(STREET)),
    (re.compile(r"\bwhere\b"), re.compile(r"\b(in|from|near|at)\s+(the\s+)?[A-Z][a-z]+")),
)  # fmt: skip
MIN_WORDS, MAX_WORDS = 4, 45
#: Words too common in questions and prose to say which sentence answers (scoring only).
VAGUE = frozenset({"before", "after", "during", "also", "just", "only", "very", "really", "actually", "get", "use"})
#: A sentence that starts like this continues the one before it.
CONTINUES = re.compile(r"^(it|its|this|that|these|those|they|he|she|which|so|then)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    """A readable piece of a passage: its text, its source's number, and where it stands."""

    text: str
    source: int
    passage: int
    position: int

    @property
    def words(self) -> int:
        return len(self.text.split())


#: Irregular verb forms, so "made" answers "makes" (a plural or third-person "s" is dropped by :func:`terms`).
LEMMAS = {"made": "make", "grown": "grow", "grew": "grow", "sold": "sell", "bought": "buy", "kept": "keep",
          "built": "build", "began": "begin", "begun": "begin", "took": "take", "taken": "take", "gave": "give",
          "given": "give", "brought": "bring", "ran": "run", "wrote": "write", "written": "write"}  # fmt: skip


def terms(text: str) -> set[str]:
    """Content words of ``text``, lower-cased, with a plural "s" dropped and irregular verb forms lemmatised."""
    words = WORD.findall(text.lower())
    found = set()
    for word in words:
        if word in STOPWORDS:
            continue
        word = LEMMAS.get(word, word)
        found.add(word[:-1] if len(word) > 4 and word.endswith("s") else word)
    return found


LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)")


def plain(text: str) -> str:
    """A line of markdown as plain text: emphasis and code markers removed, images reduced to their text; links
    are kept whole (the concierge keeps the site's own and removes the rest, see ``backends.clean_answer``)."""
    links: list[str] = []

    def hold(match: re.Match[str]) -> str:
        if match.group(1):  # an image: its alt text
            return match.group(2)
        links.append(f"[{match.group(2)}]({match.group(3)})")
        return f"\x00{len(links) - 1}\x00"

    text = LINK.sub(hold, text)
    for _ in range(3):  # nested emphasis: ***a**b* and the like
        text = EMPHASIS.sub(r"\2", text)
    text = STRAY_MARKERS.sub("", text)
    text = re.sub("\x00(\\d+)\x00", lambda match: links[int(match.group(1))], text)
    return SPACES.sub(" ", text).strip()


def _cells(line: str) -> list[str]:
    return [plain(cell) for cell in line.strip().strip("|").split("|")]


def _table_units(rows: list[str]) -> list[str]:
    """A markdown table's rows, each read with the header: "first cell: header value, header value"."""
    if len(rows) >= 2 and TABLE_RULE.match(rows[1]):
        header, body = _cells(rows[0]), [_cells(row) for row in rows[2:]]
    else:
        header, body = [], [_cells(row) for row in rows]
    units = []
    for cells in body:
        if not any(cells):
            continue
        first, rest = cells[0], cells[1:]
        parts = []
        for index, cell in enumerate(rest, start=1):
            if not cell:
                continue
            name = header[index].lower() if index < len(header) and header[index] else ""
            parts.append(f"{name} {cell}".strip())
        units.append(f"{first}: {', '.join(parts)}." if first else ", ".join(parts) + ".")
    return units


def units_of(text: str) -> list[str]:
    """``text`` (markdown) cut into readable units, in order (see the module docstring)."""
    units: list[str] = []
    table: list[str] = []
    paragraph: list[str] = []

    def flush_paragraph() -> None:
        if paragraph:
            pending = ""
            for part in SENTENCE_END.split(" ".join(paragraph)):
                part = (pending + " " + part).strip() if pending else part.strip()
                if part and len(part.split()) < MIN_WORDS:  # "Assam CTC." reads with the sentence after it
                    pending = part
                    continue
                pending = ""
                part = part.rstrip(",;:– -")
                if part:
                    units.append(part if part[-1] in ".!?)\"'”…" else part + ".")
            if pending:
                units.append(pending if pending[-1] in ".!?)\"'”…" else pending + ".")
            paragraph.clear()

    for line in text.replace("\r", "").split("\n"):
        stripped = line.strip()
        if stripped.startswith("|") and stripped.count("|") >= 2:
            flush_paragraph()
            table.append(stripped)
            continue
        if table:
            units.extend(_table_units(table))
            table = []
        if not stripped or HEADING.match(stripped):
            flush_paragraph()
            continue
        if LIST_MARKER.match(stripped):
            flush_paragraph()
            paragraph.append(plain(LIST_MARKER.sub("", stripped)))
            flush_paragraph()
            continue
        paragraph.append(plain(stripped))
    if table:
        units.extend(_table_units(table))
    flush_paragraph()
    return [unit for unit in units if WORD.search(unit.lower())]


def wanted_kinds(question: str) -> list[re.Pattern[str]]:
    lowered = question.lower()
    return [shape for asks, shape in ASKS if asks.search(lowered)]


def score(
    unit: Unit, wanted: set[str], weights: dict[str, float], kinds: list[re.Pattern[str]], title: set[str]
) -> float:
    shared = wanted & terms(unit.text)
    # The page's title says what each of its units is about, whether or not the sentence repeats it ("the video",
    # "wholesale"): its words count for every unit of the page alike. Among the page's sentences the one holding
    # the rest of the question (what is asked about the topic) then leads, not the one restating the topic.
    in_title = wanted & title
    value = sum(weights.get(term, 0.0) for term in shared - in_title)
    value += sum(weights.get(term, 1.0) for term in in_title)
    if kinds and any(kind.search(unit.text) for kind in kinds):
        value += 1.5 * max(weights.values(), default=1.0) if shared else 0.5
    value -= 0.08 * unit.passage
    if unit.text[:1].islower():  # the tail of a sentence cut by a list or a chunk boundary
        value -= 0.5
    if unit.words < MIN_WORDS:
        value -= 1.0
    elif unit.words > MAX_WORDS:
        value -= 0.02 * (unit.words - MAX_WORDS)
    return value


def following(lead: Unit, every: list[Unit]) -> Unit | None:
    """The unit after ``lead`` in its source's text: in its own passage, or in an overlapping one of the same
    source that holds the same sentence (a chunk boundary may fall right after it)."""
    said = key(lead.text)
    places = [(u.passage, u.position) for u in every if u.source == lead.source and u.text == lead.text]
    for passage, position in places:
        after = sorted((u for u in every if u.passage == passage and u.position > position), key=lambda u: u.position)
        for unit in after:
            if key(unit.text) not in said:  # a sentence the lead already holds (a repeated summary) is skipped
                return unit
    return None


def key(text: str) -> str:
    """``text`` reduced to its words, to recognise a sentence repeated with other punctuation or markup."""
    return " ".join(WORD.findall(text.lower()))


def trim(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " …"


@dataclass(frozen=True)
class Passage:
    source: int
    text: str
    title: str = ""


def answer(question: str, passages: Sequence[Passage], budget: int) -> tuple[str, set[int]]:
    """The answer text (at most about ``budget`` words) and the source numbers it cites."""
    every = [
        Unit(text, item.source, index, position)
        for index, item in enumerate(passages)
        for position, text in enumerate(units_of(item.text))
    ]
    # Passages overlap (chunks share sentences; a summary repeats the body): each sentence is a candidate once.
    seen: set[str] = set()
    units = []
    for unit in every:
        if key(unit.text) not in seen:
            seen.add(key(unit.text))
            units.append(unit)
    if not units:
        return "", set()
    wanted = terms(question) - QUESTION_WORDS - VAGUE
    # How rare each question word is among the candidates: log(1 + N / units holding it).
    holding = Counter(term for unit in units for term in wanted & terms(unit.text))
    weights = {term: math.log(1 + len(units) / count) for term, count in holding.items()}
    kinds = wanted_kinds(question)
    titles = [terms(item.title) for item in passages]
    scored = sorted(
        ((score(u, wanted, weights, kinds, titles[u.passage]), i, u) for i, u in enumerate(units)),
        key=lambda row: (-row[0], row[1]),
    )
    lead = scored[0][2] if scored[0][0] > 0 else units[0]  # nothing shared: the best passage's opening
    chosen = [lead]
    words = lead.words
    follower = following(lead, every)
    if (
        follower is not None
        and words + follower.words <= budget
        and (follower.words <= 20 or wanted & terms(follower.text) or CONTINUES.match(follower.text))
    ):
        chosen.append(follower)
        words += follower.words
    for value, _, unit in scored[1:]:
        if len(chosen) >= 3 or value <= 0:
            break
        if unit in chosen or words + unit.words > budget:
            continue
        chosen.append(unit)
        words += unit.words
    parts = []
    for index, unit in enumerate(chosen):
        text = trim(unit.text, budget) if index == 0 else unit.text
        last_of_source = index + 1 == len(chosen) or chosen[index + 1].source != unit.source
        parts.append(f"{text} [{unit.source}]" if last_of_source else text)
    return " ".join(parts), {unit.source for unit in chosen}
