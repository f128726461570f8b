"""``agent_handshake/text.py``: what is taken out of text from outside before people are shown it (invisible
characters), and what is not (the joiners that Persian, Indic scripts and emoji need to spell a word)."""

from __future__ import annotations

import time

import pytest

from agent_handshake.text import visible_name, without_invisible

ZWNJ = "\u200c"
ZWJ = "\u200d"


@pytest.mark.parametrize(
    "text",
    [
        # Persian: "I want"; without the ZWNJ, the two parts join into one misspelt word.
        f"می{ZWNJ}خواهم",
        f"نامه{ZWNJ}ها را می{ZWNJ}خوانم",
        # Devanagari: an explicit virama (ZWNJ) and a half form (ZWJ) instead of the conjunct क्ष.
        f"क्{ZWNJ}ष",
        f"क्{ZWJ}ष",
        # Bengali ya-phala after RA ("RAB"): the ZWJ before the virama.
        f"র{ZWJ}্যাব",
        # Sinhala "Sri", with the ZWJ that makes the rakaransaya.
        f"ශ්{ZWJ}රී",
        # Malayalam's chillu written with ZWJ after the virama, at the end of a word ("he"), also before a space.
        f"അവന്{ZWJ}",
        f"അവന്{ZWJ} വന്നു",
        # Emoji ZWJ sequences: technologist, with a skin tone, after a variation selector, a pirate flag.
        f"\U0001f469{ZWJ}\U0001f4bb",
        f"\U0001f469\U0001f3fd{ZWJ}\U0001f4bb",
        f"\U0001f3f3\ufe0f{ZWJ}\U0001f308",
        f"\U0001f3f4{ZWJ}\u2620\ufe0f",
    ],
)
def test_a_joiner_that_spells_a_word_or_an_emoji_is_kept(text):
    assert without_invisible(text) == text
    assert visible_name(text, 100) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Next to ASCII: it only makes two names look alike.
        (f"Tea{ZWNJ}Finder", "TeaFinder"),
        (f"shop{ZWJ}ping", "shopping"),
        (f"1{ZWJ}2", "12"),
        (f"می{ZWNJ}a", "میa"),
        (f"a{ZWJ}\U0001f4bb", "a\U0001f4bb"),
        # Leading, trailing (after a letter), repeated, or next to a space: nothing to join.
        (f"{ZWNJ}می", "می"),
        (f"{ZWJ}\U0001f4bb", "\U0001f4bb"),
        (f"می{ZWNJ}", "می"),
        (f"\U0001f469{ZWJ}", "\U0001f469"),
        (f"می{ZWNJ}{ZWNJ}خواهم", "میخواهم"),
        (f"می{ZWNJ}{ZWJ}خواهم", "میخواهم"),
        (f"क्{ZWJ}{ZWJ}ष", "क्ष"),
        (f"می {ZWNJ}خواهم", "می خواهم"),
        (f"می{ZWNJ} خواهم", "می خواهم"),
        # Between letters of a script with case (Latin, Greek, Cyrillic), where it hides and joins nothing.
        (f"Ал{ZWNJ}екс", "Алекс"),
        (f"é{ZWJ}é", "éé"),
        # Between two emoji, a ZWNJ joins nothing.
        (f"\U0001f469{ZWNJ}\U0001f4bb", "\U0001f469\U0001f4bb"),
    ],
)
def test_a_joiner_with_nothing_to_join_is_removed(text, expected):
    assert without_invisible(text) == expected


@pytest.mark.parametrize(
    "hidden",
    [
        "\u202e",  # right-to-left override
        "\u202c",  # pop directional formatting
        "\u2066",  # left-to-right isolate
        "\u2069",  # pop directional isolate
        "\u200e",  # left-to-right mark
        "\u200f",  # right-to-left mark
        "\u200b",  # zero-width space
        "\u2060",  # word joiner
        "\ufeff",  # byte-order mark
        "\u00ad",  # soft hyphen
        "\U000e0041",  # tag letter A
        "\x07",  # bell
        "\x1b",  # escape
        "\x00",
    ],
)
def test_other_invisible_characters_are_removed_even_inside_a_word(hidden):
    assert without_invisible(f"Tea{hidden}Finder") == "TeaFinder"
    assert without_invisible(f"می{hidden}خواهم") == "میخواهم"
    assert without_invisible(f"\U0001f469{hidden}\U0001f4bb") == "\U0001f469\U0001f4bb"
    assert without_invisible(f"{hidden}می{hidden}") == "می"


def test_a_joiner_is_judged_by_the_characters_that_show():
    """An invisible character next to a joiner neither rescues it nor costs it its place."""
    assert without_invisible(f"می\u200b{ZWNJ}\u2060خواهم") == f"می{ZWNJ}خواهم"
    assert without_invisible(f"Tea\u200b{ZWNJ}\u2060Finder") == "TeaFinder"
    assert without_invisible(f"می{ZWNJ}\u200b{ZWNJ}خواهم") == "میخواهم"


def test_white_space_and_visible_characters_are_kept_as_written():
    text = "line one\nline\ttwo 10⁶ H₂O ½ ＡＢＣ ℃ ﬁ é e\u0301"
    assert without_invisible(text) == text


def test_a_visible_name_is_one_line_within_its_limit():
    assert visible_name("  \u202emoc.elgoog\u202c \n\t\x07Tea\u200bFinder  ", 100) == "moc.elgoog TeaFinder"
    assert visible_name(f"  می{ZWNJ}خواهم   بات\n", 100) == f"می{ZWNJ}خواهم بات"
    assert visible_name("Tea Finder", 3) == "Tea"
    # Cut after a joiner, it would be a trailing one: it goes too.
    assert visible_name(f"می{ZWNJ}خواهم", 3) == "می"
    assert visible_name(f"\U0001f469{ZWJ}\U0001f4bb", 2) == "\U0001f469"
    assert visible_name(f"അവന്{ZWJ} വന്നു", 5) == f"അവന്{ZWJ}"
    assert visible_name("\u200b\u200c\u200d", 10) == ""


def test_removing_invisible_characters_takes_linear_time_on_hostile_text():
    for hostile in (
        ("\u064b" * 1000 + ZWNJ) * 200,
        ("ی" + "\u064b" * 1000 + ZWJ) * 200,
        (f"ی{ZWNJ}" + "\u200b" * 1000) * 200,
        ZWNJ * 200_000,
        "\u094d" * 100_000 + ZWJ * 100_000,
    ):
        started = time.perf_counter()
        without_invisible(hostile)
        assert time.perf_counter() - started < 5, hostile[:10]
