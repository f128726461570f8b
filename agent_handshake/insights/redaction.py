"""What is taken out of a question before it is stored: email addresses, secrets, phone numbers and long digit runs.

The text is normalised first, and the normalised text is what is stored: Unicode NFC, full-width, half-width and
small forms folded (full-width digits U+FF10 to U+FF19 become ``0-9``, U+FF20 ``@``, a half-width katakana its
full-width one: the same characters, so that a number or address typed on a CJK keyboard is seen; no other
compatibility form is folded, as NFKC did: "10⁶" is not "106", nor "H₂O" "H2O"), every control and format
character that is not white space removed (invisible characters that could split a number: soft hyphen,
zero-width space, word joiner, byte-order mark; and those that change what an operator is shown: bidi overrides
and isolates that reorder a line, so that "moc.elgoog" after U+202E reads "google.com", zero-width joiners and tag
characters that make two names look alike or hide words, a terminal's escape codes; but not the joiners a Persian
or Indic word or an emoji sequence is written with, see ``agent_handshake/text.py``), every Unicode hyphen, dash or
minus sign (U+2010 to U+2015, U+2212...) turned into ``-``, and any run of whitespace (a non-breaking space too)
into one space.

- ``[email]``: anything shaped like ``name@domain.tld``.
- ``[phone]``: a number written in groups with 7 to 15 digits in all, such as ``+33 6 12 34 56 78``,
  ``(555) 123-4567``, ``(555)123-4567``, ``020 7946 0958``, ``555-1234567`` or ``555 - 123 - 4567``; and any number
  of 7 or more digits after a ``+`` (``+441234567890``). Between two groups: a space, a comma, or one of
  ``- . / _`` with an optional space on either side; or nothing next to a bracketed group.
- ``[secret]``: a token-like string (an API key, a bearer token, a JWT, a hex session id, a link's secret part):
  letters, digits and ``_ - . + / = ~`` without a space, holding 20 or more ASCII letters and digits in a row that
  switch between letters and digits at least 3 times (``sk-proj-aB3dE5...``, ``eyJhbGciOiJIUzI1NiJ9.eyJ...``). Words,
  slugs (``organic-green-tea-2024-edition``), SKUs and an IBAN's letters (``FR76...``) do not switch like that.
- ``[number]``: any run of 6 or more digits, inside a word or not (a card, account, order or ID number), and a
  grouped number of more than 15 digits (``4111 1111 1111 1111``, ``4111,1111,1111,1111``), and four or five
  groups of four digits separated by a comma and a space (``4111, 1111, 1111, 1111``) unless they are years.

What stays readable: years and year ranges (``2024``, ``1990-2020``), real dates (``2024-05-01``, ``01/05/2024``;
not ``12-34-5678``: the month must be 1-12 and the day 1-31), quantities and times (``250 ml``, ``2 min``,
``12:30``), prices (``1,299.00``, ``1,299,000``), versions (``3.2.1``), and any number of at most 5 digits. The
price of that: a grouped quantity of 7 or more digits (``1 234 567``, ``1.234.567``) reads as a phone number and
is taken out too, as does a list of numbers adding up to 7 digits or more (``250,500,1000``).
"""

from __future__ import annotations

import re
import unicodedata

from ..text import without_invisible

#: Full-width, half-width and small forms (U+3000, U+FE50 to U+FE6B, U+FF01 to U+FFEE), as the characters they
#: are in another size (U+FF10 is "0", U+FF20 "@"). Folding them changes no meaning, unlike NFKC's other folds.
WIDTH_FORMS = {
    code: unicodedata.normalize("NFKC", chr(code))
    for code in (0x3000, *range(0xFE50, 0xFE70), *range(0xFF00, 0xFFF0))
    if unicodedata.decomposition(chr(code)).startswith(("<wide>", "<narrow>", "<small>"))
}
#: Unicode hyphens, dashes and minus signs (after folding widths): turned into "-".
DASHES = re.compile("[\u2010-\u2015\u2043\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d]")
WHITESPACE = re.compile(r"\s+")

# The lookbehinds start a match only where a word starts: linear time on any text (no retrying inside a word).
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
#: Between two digit groups: one of - . / _ with an optional space either side, a comma, or a space. Never empty,
#: so that no two ways of splitting a run of digits compete (linear time).
SEPARATOR = r"(?: ?[-./_] ?|,| )"
#: Digit groups joined by separators, optionally after "+" or in brackets: a candidate phone number. A bracketed
#: group may touch the next group: "(555)123-4567". An underscore may come before (``x_4111_1111``).
GROUPED = re.compile(rf"(?<![^\W_]|\+)(?P<plus>\+ ?)?\(?\d+\)?(?:{SEPARATOR}\(?\d+\)?|(?<=\))\d+\)?|\(\d+\)?)*")
_YEAR = r"(?:1[89]|2[01])\d\d"
_MONTH = r"(?:0?[1-9]|1[0-2])"
_DAY = r"(?:0?[1-9]|[12]\d|3[01])"
#: A real date: year-month-day, or day-month-year / month-day-year with a 4- or 2-digit year.
DATE = re.compile(rf"{_YEAR}[-/.]{_MONTH}[-/.]{_DAY}|(?:{_DAY}[-/.]{_MONTH}|{_MONTH}[-/.]{_DAY})[-/.](?:{_YEAR}|\d\d)")
YEARS = re.compile(rf"{_YEAR}(?:(?: ?[-/] ?|, ?| ){_YEAR})*")
#: An amount with thousands separators, optionally with decimals: "1,299.00", "1,299,000".
AMOUNT = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
DIGIT_RUN = re.compile(r"\d{6,}")
#: A card number written as a list: "4111, 1111, 1111, 1111" (a list of smaller numbers stays: "100, 200, 300").
CARD_LIST = re.compile(r"(?<![\d,])\d{4}(?:, \d{4}){3,4}(?![\d])")

PHONE_DIGITS = range(7, 16)

#: A candidate token: starting where a token starts (linear time, as for EMAIL), at least as long as a secret part.
TOKEN = re.compile(r"(?<![A-Za-z0-9_.+/=~-])[A-Za-z0-9_.+/=~-]{20,}")
SECRET_PART = re.compile(r"[A-Za-z0-9]{20,}")
#: Letters to digits or digits to letters: random keys switch often, words and product codes hardly.
SWITCH = re.compile(r"[A-Za-z](?=[0-9])|[0-9](?=[A-Za-z])")
SECRET_SWITCHES = 3


def _token(match: re.Match[str]) -> str:
    for part in SECRET_PART.finditer(match.group()):
        if len(SWITCH.findall(part.group())) >= SECRET_SWITCHES:
            return "[secret]"
    return match.group()


def _grouped(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(character.isdigit() for character in text)
    if match.group("plus") and digits >= 7:
        return "[phone]" if digits in PHONE_DIGITS else "[number]"
    if DATE.fullmatch(text) or YEARS.fullmatch(text) or AMOUNT.fullmatch(text):
        return text
    grouped = any(not character.isdigit() for character in text.strip("()"))
    if grouped and digits in PHONE_DIGITS:
        return "[phone]"
    if grouped and digits > PHONE_DIGITS[-1]:
        return "[number]"
    return text  # a single group: the digit-run rule decides


def normalise(text: str) -> str:
    """``text`` in NFC with its widths folded, without invisible characters, with ``-`` for every dash and one space
    for any run of whitespace."""
    # NFC after folding: a half-width voiced mark composes with its kana ("ｶﾞ" is "ガ").
    text = unicodedata.normalize("NFC", text.translate(WIDTH_FORMS))
    # Invisible characters could split a number so that it is not seen, or change what is shown of the text.
    text = without_invisible(text)
    text = DASHES.sub("-", text)
    return WHITESPACE.sub(" ", text)


def redact(text: str) -> str:
    """``text`` normalised, with email addresses, secrets, phone numbers and long digit runs replaced by placeholders
    (see the module docstring)."""
    text = EMAIL.sub("[email]", normalise(text))
    text = TOKEN.sub(_token, text)  # before the digit rules, which would leave a key's letters readable
    text = CARD_LIST.sub(lambda match: match.group() if YEARS.fullmatch(match.group()) else "[number]", text)
    text = GROUPED.sub(_grouped, text)
    return DIGIT_RUN.sub("[number]", text)
