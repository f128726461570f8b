"""Extractive answers: the sentence that answers the question first, then a sentence or two of support.

The retrieved passages are markdown. They are cut into *units*, each one readable on its own: a sentence of
prose, a list item without its marker, or a table row read with its header ("Fukamushi (deep steamed): steaming
time about 1-2 min, leaf broken, fine"); headings and emphasis markers are dropped, and numbers keep their units
and ranges. Each unit is scored against the question:

- the question's content words it holds, compared as Snowball stems ("opening" answers "open", "hōroku" "horoku"),
  each weighted by how rare it is among the candidate units (a word every passage repeats, the topic itself, says
  little about which sentence answers); the words of a page's title, of the passage's section heading and of the
  site section the page belongs to ("Videos": "in the video" is about a video page) count for each of its units
  alike, so the page's sentence that says what is asked leads, not the one restating the topic
  (of two such units, the one naming the asked thing goes first); the question's words elsewhere in the unit's
  passage count a little (a list item under "ISO 3103 ... specifies:" is about ISO 3103);
- what the question asks for: a temperature, a duration, an amount, a share, a price, a count of the thing named
  ("how many infusions": "eight infusions"), a date or a year, a clock time; a unit on the topic holding one of
  those, when asked, is worth one and a half of the rarest shared word;
- how close its passage is to the question in meaning: the retriever's cosine similarity of the passage's embedding
  to the question's, already computed, so it costs nothing ("Which countries do you ship to?" is closer to the
  passage saying where the shop ships than to a gift box's "five teas from five countries");
- its passage's rank (the retriever's order breaks near-ties) and a penalty for fragments and run-on units.

A question on the page (an FAQ entry) is not an answer: its score goes to the unit after it.

The answer leads with the best unit; the unit that follows it in its passage comes next when it continues the same
thought (a short sentence, or one sharing a content word), then the next best unit from another source, within the
word budget (about 60 words by default; ``context.max_tokens`` bounds it). Each source's units are followed by its
``[n]`` citation.
"""

from __future__ import annotations

import functools
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import snowballstemmer

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
#: A sentence ends after ".", "!" or "?" (and a closing bracket or quote: "(... Cape Cod.) After ...") before a
#: capital, a digit, an opening bracket or quote, or a currency sign ("... 18:30. $85 per person").
SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][)\"'”]))\s+(?=[A-Z0-9\"'(\[*_$£€])")
LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
HEADING = re.compile(r"^\s*#{1,6}\s")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
#: Emphasis or code markers around text. A code span's backticks are at most three: "`+" retried over a long run of
#: backticks took seconds.
EMPHASIS = re.compile(r"(\*{1,3}|_{1,3}|`{1,3})(?=\S)(.+?)(?<=\S)\1")
STRAY_MARKERS = re.compile(r"(?<![\w*])[*_`]+|[*_`]+(?![\w*])")
SPACES = re.compile(r"[ \t]+")

#: A number, a decimal or a range ("1.2", "1,5", "1-2"). It starts where a number starts, not inside a longer run of
#: digits: tried from every digit of an 8,000-digit word it took seconds (each try runs to the end of the run).
NUMBER = r"(?<![\d.,])\d+(?:[.,]\d+)?(?:\s*[–-]\s*\d+(?:[.,]\d+)?)?"
NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|fifty|hundred|dozen"
)
#: What a question asks for, and what a unit holding it looks like. A unit joins its number with a space or a
#: hyphen ("a 1.2-litre kettle"); "%" and "°C" are not followed by a word boundary.
DURATION = (
    rf"{NUMBER}\s*-?(s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?)\b"
    rf"|\b({NUMBER_WORDS})[\s-]+(seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b"
)
AMOUNT = (
    rf"{NUMBER}\s*(%|°\s*[CF]\b|-?(g|kg|mg|ml|l|litres?|liters?|cm|mm|m|oz|grams?|cups?|pieces?|seats?|teas?"
    r"|pounds?|lbs?|tons?|tablespoons?|teaspoons?)\b)|\$\s*\d|\b(ten|twenty|one|two|three)[- ]\w+"
)
MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
STREET = r"\b\d{1,5}\s+([NSEW]{1,2}\s+)?[A-Z][a-z]+\s+(St|Street|Ave|Avenue|Rd|Road|Blvd|Lane|Way)\b"
MONEY = rf"[$£€]\s*\d|\b({NUMBER}|{NUMBER_WORDS})\s+(dollars|usd|cents|pence|shillings|euros|yen)\b"
AMOUNT_SHAPE = re.compile(AMOUNT)
CLOCK = r"\b\d{1,2}:\d\d\b|\b\d{1,2}\s*(am|pm|a\.m\.|p\.m\.)"
ASKS = (
    (re.compile(r"\b(how hot|temperature|how warm|how cool|degrees?)\b"), re.compile(rf"{NUMBER}\s*°\s*[CF]\b")),
    (re.compile(r"\b(how long|how many (minutes|hours|days|weeks|months|years)|duration)\b"), re.compile(DURATION)),
    (re.compile(r"\b(percent|percentage|proportion)\b"), re.compile(rf"{NUMBER}\s*%")),
    (re.compile(r"\b(how much|how many|amount|quantity|ratio|size|weigh|weight|big)\b"), AMOUNT_SHAPE),
    (re.compile(r"\b(price|cost|costs|how much does|how much is|charge|fee|tax|duty|tariff)\b"), re.compile(MONEY)),
    (re.compile(r"\b(when|what year|which year|what date|since when)\b"),
     re.compile(rf"\b(1[5-9]\d\d|20\d\d)s?\b|\b({MONTHS})\b", re.IGNORECASE)),
    (re.compile(r"\b(what time|which time|what hours|opening hours|hours|when (do|does|is|are)\b.*\b(open|close))"),
     re.compile(CLOCK, re.IGNORECASE)),
    (re.compile(r"\b(address|where is)\b"), re.compile(STREET)),
    (re.compile(r"\bwhere\b"), re.compile(r"\b(in|from|near|at)\s+(the\s+)?[A-Z][a-z]+")),
)  # fmt: skip
#: A question naming a price asks for money, not any amount ("a ten-seat bar" does not answer "what does it cost").
PRICE = re.compile(r"\b(price|prices|cost|costs|charge|fee|fees|tax|duty|tariff)\b")
#: "How many infusions": a count of the thing named after "many".
HOW_MANY = re.compile(r"\bhow many\s+(\w+)")
#: "How long", "how hot", "how big": a degree word after "how" says what kind of answer is wanted (a quantity), not
#: what the question is about. Any other word after "how" may be the topic ("how matcha is made", "how caffeinated").
HOW = re.compile(r"\bhow\s+(\w+)")
DEGREE = frozenset(
    "long short hot warm cold cool big large small much many often frequently far old young soon quickly fast slow "
    "tall high low deep wide thick heavy strong early late expensive cheap".split()
)
#: "What time", "which year", "what date": the word after "what" or "which" says what kind of answer is wanted (a clock
#: time, a year, a date: see :data:`ASKS`), not what the question is about.
WHAT = re.compile(r"\b(?:what|which)\s+(times?|years?|dates?)\b")
#: "What did you write about cold brew?", "what have you published on matcha": how the question is put (asking what
#: the site says about a topic), not its topic; an About page's "Write. Our blog covers ..." shares only that word.
FRAME = re.compile(
    r"\b(write|writes|wrote|written|writing|say|says|said|publish|published|blog|blogged)\s+"
    r"(?:anything\s+|something\s+)?(?:about|on|regarding|concerning)\b"
)
MIN_WORDS, MAX_WORDS = 4, 45
#: How much a question word in a unit's passage (its section), but not in the unit, counts for the unit: a list item
#: under "ISO 3103 ... It specifies:" is about ISO 3103 (measured on the development sets: 0.2 of its weight).
PASSAGE_CONTEXT = 0.2
#: How much a unit loses per point of cosine similarity its passage is below the best passage's, in units of the
#: question's rarest shared word (measured on the development sets: 0.25-0.75 gave the same answers, 1.5 and more
#: lost some).
PASSAGE_SIMILARITY = 0.5
#: Words too common in questions and prose to say which sentence answers (scoring only).
VAGUE = frozenset({"before", "after", "during", "also", "just", "only", "very", "really", "actually", "get", "use"})
#: The reader's score (a logit) under which a unit it read is not support worth adding (one it finds about as
#: likely to answer as not is); a unit it did not read is judged by the word scores alone.
SUPPORT_SCORE = 0.0
#: How much higher (in logits) the reader must score its best unit than the word scores' choice to lead with it.
OVERRIDE_MARGIN = 2.0
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


#: Irregular verb forms, so "made" answers "makes" (regular endings are handled by :func:`stem`).
LEMMAS = {"made": "make", "grown": "grow", "grew": "grow", "sold": "sell", "bought": "buy", "kept": "keep",
          "built": "build", "began": "begin", "begun": "begin", "took": "take", "taken": "take", "gave": "give",
          "given": "give", "brought": "bring", "ran": "run", "wrote": "write", "written": "write"}  # fmt: skip
POSSESSIVE = re.compile(r"['’]s\b")


#: One Snowball stemmer per thread: the pure-Python stemmer keeps each call's state on the object, so one shared by
#: threads returns wrong stems (or raises IndexError), which :func:`stem`'s cache would then keep.
_STEMMERS = threading.local()


def _english():  # a Snowball stemmer: the pure-Python one, or PyStemmer's when installed
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer


@functools.lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """The Snowball (Porter2) English stem of a lower-cased word, the same for its regular inflections
    ("opening" and "opens" -> "open", "shipping" -> "ship", "monthly" -> "month"), after :data:`LEMMAS` for the
    irregular ones. Only ever compared with other stems, so it need not be a word."""
    word = LEMMAS.get(word, word)
    return word if word.isdigit() else _english().stemWord(word)


def unaccented(text: str) -> str:
    """``text`` without its accents ("hōroku" -> "horoku"; a combining accent alone -> "")."""
    if text.isascii():
        return text
    return "".join(part for part in unicodedata.normalize("NFKD", text) if not unicodedata.combining(part))


def words_of(text: str) -> list[str]:
    """The words of ``text``, lower-cased, accents and possessive "'s" taken off ("hōroku" -> "horoku")."""
    return WORD.findall(POSSESSIVE.sub("", unaccented(text.lower())))


def terms(text: str) -> set[str]:
    """Content words of ``text``, as stems (:func:`stem`)."""
    return {stem(word) for word in words_of(text) if word not in STOPWORDS}


#: The stems that never say what a question is about.
NOT_ABOUT = frozenset(stem(word) for word in QUESTION_WORDS | VAGUE)


#: A link or an image; its text holds no "[" (each "[" of a long run would read to the end of the line: quadratic).
LINK = re.compile(r"(!?)\[([^\[\]]*)\]\(([^)\s]*)\)")
#: A page's own footnote mark ("...harvest [3]."): its note is not quoted, and an answer's ``[n]`` are its citations
#: of the site's sources alone (the concierge reads the first as the source the answer leads with).
FOOTNOTE = re.compile(r"\s?\[\d{1,3}\]")


def plain(text: str) -> str:
    """A line of markdown as plain text: emphasis and code markers and footnote marks removed, images reduced to their
    text; links are kept whole (the concierge keeps the site's own and removes the rest, see
    ``backends.clean_answer``)."""
    links: list[str] = []

    def hold(match: re.Match[str]) -> str:
        if match.group(1):  # an image: its alt text
            return match.group(2)
        links.append(f"[{match.group(2)}]({match.group(3)})")
        return f"\x00{len(links) - 1}\x00"

    text = FOOTNOTE.sub("", LINK.sub(hold, text))
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
            first = len(units)  # this paragraph's first unit
            for part in SENTENCE_END.split(" ".join(paragraph)):
                part = (pending + " " + part).strip() if pending else part.strip()
                if part and len(part.split()) < MIN_WORDS:
                    if not pending and len(units) > first and CONTINUES.match(part):
                        units[-1] = f"{units[-1]} {part}"  # "It's harmless." goes on from the sentence before
                        continue
                    pending = part  # "Assam CTC." reads with the sentence after it
                    continue
                pending = ""
                part = part.rstrip(",;:– -")
                if part:
                    units.append(part if part[-1] in ".!?)\"'”…" else part + ".")
            pending = pending.rstrip(",;:– -")
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
    """What a unit answering ``question`` holds (see :data:`ASKS`), as patterns; empty when it asks for no kind."""
    lowered = question.lower()
    counted = HOW_MANY.search(lowered)
    counted = counted if counted and counted.group(1) not in STOPWORDS else None
    # A price asked for, or a count of a named thing, is what the answer holds, not any amount ("a ten-seat bar").
    specific = bool(counted or PRICE.search(lowered))
    kinds = [shape for asks, shape in ASKS if asks.search(lowered) and not (specific and shape is AMOUNT_SHAPE)]
    if counted:
        # "342 chests", "eight infusions", "two or three hours" (a word or two between the number and the thing).
        thing = re.escape(stem(counted.group(1)))
        # The number starts where a number starts (see NUMBER), not inside a long run of digits.
        count = rf"\b((?<![\d.,])\d[\d,.]*|{NUMBER_WORDS})\s+([\w-]+\s+){{0,2}}?{thing}"
        kinds.append(re.compile(count, re.IGNORECASE))
    return kinds


def question_terms(question: str) -> set[str]:
    """The content words of ``question`` that say what it is about, as stems: not the words saying what kind of
    answer is wanted ("how long", "how hot", "what time"), nor the vague ones (:data:`NOT_ABOUT`), nor the frame
    asking what the site says about something (:data:`FRAME`)."""
    lowered = question.lower()
    asked = {stem(word) for word in HOW.findall(lowered) if word in DEGREE} | {stem(w) for w in WHAT.findall(lowered)}
    # Only the frame's own word goes: the same word in the topic stays ("written about writing retreats").
    unframed = FRAME.sub(lambda match: match.group(0)[len(match.group(1)) :], lowered)
    return terms(unframed) - NOT_ABOUT - asked


def score(
    unit: Unit,
    held: set[str],
    wanted: set[str],
    weights: dict[str, float],
    kinds: list[re.Pattern[str]],
    title: set[str],
) -> float:
    """How well ``unit`` (whose terms are ``held``) answers a question asking for ``wanted`` (see the module
    docstring)."""
    shared = wanted & held
    # The page's title says what each of its units is about, whether or not the sentence repeats it ("the video",
    # "wholesale"): its words count for every unit of the page alike. Among the page's sentences the one holding
    # the rest of the question (what is asked about the topic) then leads, not the one restating the topic.
    in_title = wanted & title
    value = sum(weights.get(term, 0.0) for term in shared - in_title)
    value += sum(weights.get(term, 1.0) for term in in_title)
    # ... and of two such units, the one that names what is asked about ("Fukamushi (deep steamed): ..." on a page
    # comparing two steamings) goes first.
    value += 0.25 * sum(weights.get(term, 1.0) for term in in_title & shared)
    # What is asked for ("how long": a duration) is worth most in a unit about the question's topic: one sharing its
    # words, or on a page whose title does ("In 1973 the Kunming Tea Factory developed ..." on the wet-piling page).
    if kinds and any(kind.search(unit.text) for kind in kinds):
        value += 1.5 * max(weights.values(), default=1.0) if shared or in_title else 0.5
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
    places = [(u.passage, u.position) for u in every if u.source == lead.source and u.text == lead.text]
    for passage, position in places:
        after = sorted((u for u in every if u.passage == passage and u.position > position), key=lambda u: u.position)
        for unit in after:
            if not repeats(unit, [lead]):  # a sentence the lead already says (a repeated summary) is skipped
                return unit
    return None


def holds(whole: str, part: str) -> bool:
    """Whether the words ``part`` (a :func:`key`) stand in ``whole`` as whole words ("green tea" is not in "evergreen
    tea")."""
    return f" {part} " in f" {whole} "


def repeats(unit: Unit, chosen: Sequence[Unit]) -> bool:
    """Whether ``unit`` says again what a chosen unit says, or says it with more: a page's summary repeated in its
    body ("A quick vertical video ..." and "2 min video. A quick vertical video ..." are two candidates, not one).
    A sentence of fewer than ``MIN_WORDS`` words inside a longer one is not a repeat ("Per cup." is a list item of
    its own, whatever sentence also says "per cup")."""
    said = key(unit.text)
    for other in chosen:
        their = key(other.text)
        if said == their:
            return True
        shorter, longer = sorted((said, their), key=len)
        if len(shorter.split()) >= MIN_WORDS and holds(longer, shorter):
            return True
    return False


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
    #: The passage's section heading ("Pairing dinners"): like the title, it says what each of its sentences is about.
    heading: str = ""
    #: The cosine similarity of the passage's embedding to the question's, from retrieval (None: not known).
    similarity: float | None = None
    #: The site section the page belongs to ("Videos", "Shop"): what kind of page it is.
    section: str = ""


def similarity_distances(passages: Sequence[Passage], units: Sequence[Unit]) -> list[float]:
    """How far below the best passage's similarity to the question each unit's passage is (0 for the best; a
    passage without a similarity counts as the least similar one; all 0 when no passage has one)."""
    known = [item.similarity for item in passages if item.similarity is not None]
    if not known:
        return [0.0] * len(units)
    best, least = max(known), min(known)
    return [
        best - (passages[u.passage].similarity if passages[u.passage].similarity is not None else least) for u in units
    ]


@dataclass
class Ranking:
    """A question's candidate units, each once, with their scores (see the module docstring), and every unit of
    the passages (overlaps included) for finding the one that follows a chosen unit."""

    units: list[Unit]
    values: list[float]
    every: list[Unit]
    wanted: set[str]

    def best(self, count: int) -> list[Unit]:
        """The ``count`` best-scored units, best first."""
        order = sorted(range(len(self.units)), key=lambda index: (-self.values[index], index))
        return [self.units[index] for index in order[:count]]


def rank(question: str, passages: Sequence[Passage]) -> Ranking:
    """The candidate units of ``passages`` scored for ``question``."""
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
    wanted = question_terms(question)
    if not units:
        return Ranking([], [], every, wanted)
    # How rare each question word is among the candidates: log(1 + N / units holding it).
    held = [terms(unit.text) for unit in units]
    holding = Counter(term for unit_terms in held for term in wanted & unit_terms)
    weights = {term: math.log(1 + len(units) / count) for term, count in holding.items()}
    kinds = wanted_kinds(question)
    titles = [terms(f"{item.title} {item.heading} {item.section}") for item in passages]
    values = [score(u, held[i], wanted, weights, kinds, titles[u.passage]) for i, u in enumerate(units)]
    in_passage: list[set[str]] = [set() for _ in passages]
    for unit, unit_terms in zip(units, held, strict=True):
        in_passage[unit.passage] |= unit_terms & wanted
    for index, unit in enumerate(units):
        context = in_passage[unit.passage] - held[index] - titles[unit.passage]
        values[index] += PASSAGE_CONTEXT * sum(weights[term] for term in context)
    for index, distance in enumerate(similarity_distances(passages, units)):
        values[index] -= PASSAGE_SIMILARITY * max(weights.values(), default=1.0) * distance
    # A question on the page (an FAQ's "Which of your teas are caffeine-free?") is not an answer: the unit after it is.
    place = {(unit.passage, unit.position): index for index, unit in enumerate(units)}
    for index, unit in enumerate(units):
        if unit.text.endswith("?"):
            after = place.get((unit.passage, unit.position + 1))
            if after is not None and not units[after].text.endswith("?"):
                values[after] = max(values[after], values[index])
            values[index] = min(values[index], 0.0)
    return Ranking(units, values, every, wanted)


def answer(
    question: str, passages: Sequence[Passage], budget: int, read: dict[str, float] | None = None
) -> tuple[str, set[int]]:
    """The answer text (at most about ``budget`` words) and the source numbers it cites.

    ``read``: the reader's scores of the best candidates (by :func:`key` of their text, see :mod:`.reading`). The
    reader overrides the word scores where it clearly disagrees: the unit it scores highest leads when it scores
    :data:`OVERRIDE_MARGIN` above the unit the words chose, and support it scores under :data:`SUPPORT_SCORE`
    is left out. (Where it is unsure, the words' choice stands: they know what the question asks for, a
    temperature, a price, and the page's title, which a sentence read alone may not repeat.)"""
    ranking = rank(question, passages)
    units, every, wanted, values = ranking.units, ranking.every, ranking.wanted, ranking.values
    if not units:
        return "", set()
    scored = sorted(((values[i], i, u) for i, u in enumerate(units)), key=lambda row: (-row[0], row[1]))
    # Without the reader, a question sharing no word with any unit gets the best passage's opening.
    lead = scored[0][2] if scored[0][0] > 0 else units[0]
    if read:
        unread = min(read.values()) - 1.0
        reader_best = max(units, key=lambda unit: read.get(key(unit.text), unread))
        if read.get(key(reader_best.text), unread) >= read.get(key(lead.text), unread) + OVERRIDE_MARGIN:
            lead = reader_best
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
    for value, _, unit in scored:
        if len(chosen) >= 3 or value <= 0:
            break
        if unit in chosen or words + unit.words > budget or repeats(unit, chosen):
            continue
        if read and read.get(key(unit.text), SUPPORT_SCORE) < SUPPORT_SCORE:
            continue
        chosen.append(unit)
        words += unit.words
    parts = []
    for index, unit in enumerate(chosen):
        text = trim(unit.text, budget) if index == 0 else unit.text
        last_of_source = index + 1 == len(chosen) or chosen[index + 1].source != unit.source
        parts.append(f"{text} [{unit.source}]" if last_of_source else text)
    return " ".join(parts), {unit.source for unit in chosen}
