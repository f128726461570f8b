"""What is taken out of a question before it is stored: email addresses, phone numbers and long digit runs.

- ``[email]``: anything shaped like ``name@domain.tld``.
- ``[phone]``: a number written in groups (spaces, dots, dashes, slashes, brackets between them) with 7 to 15
  digits in all, such as ``+33 6 12 34 56 78``, ``(555) 123-4567``, ``020 7946 0958`` or ``555-1234567``; and any
  number of 7 or more digits after a ``+`` (``+441234567890``).
- ``[number]``: any run of 6 or more digits, inside a word or not (a card, account, order or ID number), and a
  grouped number of more than 15 digits (``4111 1111 1111 1111``).

What stays readable: years and year ranges (``2024``, ``1990-2020``), dates (``2024-05-01``, ``01/05/2024``),
quantities and times (``250 ml``, ``2 min``, ``12:30``), prices (``1,299.00``), versions (``3.2.1``), and any
number of at most 5 digits. The price of that: a grouped quantity of 7 or more digits (``1 234 567``) reads as
a phone number and is taken out too.
"""

from __future__ import annotations

import re

# The lookbehinds start a match only where a word starts: linear time on any text (no retrying inside a word).
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
#: Digit groups joined by one separator each, optionally after "+" or in brackets: a candidate phone number.
GROUPED = re.compile(r"(?<![\w+])(?P<plus>\+\s?)?\(?\d+\)?(?:[ .\-/]\(?\d+\)?|\(\d+\))*")
DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")
YEARS = re.compile(r"(?:1[89]|2[01])\d\d(?:[ \-/](?:1[89]|2[01])\d\d)*")
DIGIT_RUN = re.compile(r"\d{6,}")

PHONE_DIGITS = range(7, 16)


def _grouped(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(character.isdigit() for character in text)
    if match.group("plus") and digits >= 7:
        return "[phone]" if digits in PHONE_DIGITS else "[number]"
    if DATE.fullmatch(text) or YEARS.fullmatch(text):
        return text
    grouped = any(not character.isdigit() for character in text.strip("()"))
    if grouped and digits in PHONE_DIGITS:
        return "[phone]"
    if grouped and digits > PHONE_DIGITS[-1]:
        return "[number]"
    return text  # a single group: the digit-run rule decides


def redact(text: str) -> str:
    """``text`` with email addresses, phone numbers and long digit runs replaced by placeholders (see the module
    docstring)."""
    text = EMAIL.sub("[email]", text)
    text = GROUPED.sub(_grouped, text)
    return DIGIT_RUN.sub("[number]", text)
