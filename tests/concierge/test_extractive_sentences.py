"""Which sentence an extractive answer leads with when the question is phrased away from the page: the page's
title and the section's heading count for all of their sentences alike, words are compared as stems, the kind of
answer asked for (a count, a price, a share, a clock time, a size) is recognised, and a question on the page passes
its score to its answer."""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from agent_handshake.concierge.extractive import (
    Passage,
    answer,
    question_terms,
    stem,
    terms,
    units_of,
    wanted_kinds,
)

TEAPOT = Passage(
    1,
    "A Yixing clay teapot, hand-thrown in Dingshu from zisha clay, with a 200 ml capacity and a pierced strainer. "
    "Never put it in a dishwasher; rinse it with hot water only and let it dry with the lid off.",
    "Yixing Clay Teapot",
)


def lead(question: str, passages: list[Passage], budget: int = 60) -> str:
    text, _ = answer(question, passages, budget)
    return text


def test_the_title_counts_for_every_sentence_of_its_page():
    # Both sentences are about the teapot (the title says so); the one that answers leads, not the one that
    # repeats the title's words.
    text, cited = answer("Can the Yixing clay teapot go in the dishwasher?", [TEAPOT], budget=60)
    assert text.startswith("Never put it in a dishwasher"), text
    assert cited == {1}


def test_determiners_are_not_content_words():
    assert terms("Pour it from one cup to another, each time") == terms("pour cup time")
    assert not terms("one another each every some all any")


def test_words_are_compared_as_stems_without_accents_or_possessives():
    assert terms("opening opens opened") == terms("open")
    assert terms("shipping shipped ships") == terms("ship")
    assert terms("countries") == terms("country")
    assert terms("stored storing") == terms("store")
    assert terms("monthly") == terms("month")
    assert terms("hōroku") == terms("horoku")
    assert terms("the shop's address") == terms("shop address")
    assert terms("Tomás") != terms("Tomas's family")  # "family" keeps its "ly"
    assert terms("address glass status") == {"address", "glass", "status"}  # not plurals


def test_an_inflected_word_in_the_page_matches_the_question():
    passages = [
        Passage(1, "Store the tin somewhere cool and dark. Always let a chilled package warm up for 2 hours before "
                   "opening it, so no moisture condenses on the leaf.", "Keeping tea"),
    ]  # fmt: skip
    assert lead("How long should a package wait before I open it?", passages).startswith("Always let a chilled")


def test_the_section_heading_counts_like_the_title():
    passages = [
        Passage(1, "Our ten-seat tea bar hosts weekly flights, classes and monthly pairing dinners.", "Tasting room"),
        Passage(2, "On the first Friday of each month we serve five courses. $85 per person, 16 seats.",
                "Tasting room", "Pairing dinners"),
    ]  # fmt: skip
    assert lead("How much does a seat at the pairing dinner cost?", passages).startswith("$85 per person")


def test_a_price_question_wants_money_not_any_amount():
    passages = [
        Passage(1, "The dinner room has twenty seats for guests.", "Events"),
        Passage(2, "Each dinner is $85 a person, wine not included.", "Events"),
    ]
    assert lead("How much does a seat at the dinner cost?", passages).startswith("Each dinner is $85")


def test_how_many_things_prefers_a_count_of_those_things():
    passages = [
        Passage(1, "The gaiwan session uses 110 ml of water and 7 g of leaf.", "Gongfu"),
        Passage(2, "Tomás brews eight infusions in one long sitting.", "Gongfu"),
    ]
    assert lead("How many infusions are in the gaiwan session?", passages).startswith("Tomás brews eight infusions")


def test_a_share_and_a_hyphenated_size_are_recognised():
    blend = Passage(
        1,
        "Our bestselling Breakfast Blend: malty Assam and bright Ceylon. It is 70% Assam and 30% Ceylon.",
        "Breakfast Blend",
    )
    assert lead("How much of the Breakfast Blend is Assam?", [blend]).startswith("It is 70% Assam")
    kettle = [
        Passage(1, "Hojicha leaves are big and fluffy, so 4 g looks like a lot.", "Hojicha"),
        Passage(2, "Tomás cares for the 1.2-litre Nanbu kettle.", "Teaware"),
    ]
    assert any(kind.search("a 1.2-litre kettle") for kind in wanted_kinds("How big is it?"))
    # "how big": "big" says what is asked (a size), not what about.
    assert lead("How big is the kettle?", kettle).startswith("Tomás cares for the 1.2-litre")


def test_a_clock_time_answers_what_time():
    passages = [
        Passage(1, "We opened our doors on a Saturday in April 2025, with free tastings all day.", "We are open"),
        Passage(2, "Saturday: shop 09:00–18:00, tasting room 11:00–17:00.", "Contact", "Opening hours"),
    ]
    assert lead("What time do you open on Saturdays?", passages).startswith("Saturday: shop 09:00")


@pytest.mark.parametrize(
    ("question", "title", "text", "expected"),
    [
        # An asked-for kind counts fully on a page about the topic: the year sentence names none of the question's
        # words, the page's title does.
        (
            "When was wet piling for ripe pu-erh invented?",
            "Ripe pu-erh and wet piling",
            "Raw and ripe pu-erh start from the same leaf, one aged for decades, the other fermented under damp piles. "
            "In 1973 the Kunming Tea Factory developed a way to imitate decades of aging in a few weeks.",
            "In 1973",
        ),
        # Of the units alike under the title, the one naming the asked thing leads.
        (
            "How long is fukamushi sencha steamed?",
            "Asamushi vs fukamushi sencha",
            "Asamushi (light steamed): steaming time about 20–40 s, leaf long.\n\n"
            "Fukamushi (deep steamed): steaming time about 1–2 min, leaf broken.",
            "Fukamushi (deep steamed)",
        ),
    ],
)
def test_units_alike_under_the_title(question, title, text, expected):
    assert lead(question, [Passage(1, text, title)]).startswith(expected)


def test_a_question_on_the_page_gives_way_to_its_answer():
    faq = Passage(
        1,
        "**Which of your teas are caffeine-free?**\nOur rooibos, honeybush and herbal blends. Hojicha is low in "
        "caffeine but not free of it.",
        "FAQ",
    )
    text = lead("Which of your teas are caffeine-free?", [faq])
    assert text.startswith("Our rooibos, honeybush"), text
    assert "?" not in text


def test_a_sentence_ends_after_a_closing_bracket_and_before_a_price():
    units = units_of("(A fourth ship had run aground off Cape Cod.) After weeks of meetings the men boarded the "
                     "ships. The first Friday of each month, 18:30. $85 per person, 16 seats.")  # fmt: skip
    assert units == [
        "(A fourth ship had run aground off Cape Cod.)",
        "After weeks of meetings the men boarded the ships.",
        "The first Friday of each month, 18:30.",
        "$85 per person, 16 seats.",
    ]


def test_the_passage_around_a_list_item_says_what_it_is_about():
    guide = Passage(
        1,
        "ISO 3103 is a standard for preparing tea for sensory testing, not for drinking. It specifies:\n\n"
        "- 2 g of tea per 100 ml of water\n- a steep of 6 minutes\n",
        "Brewing standards",
    )
    other = Passage(2, "Steep a breakfast blend for 4 minutes for everyday drinking.", "Breakfast blend")
    # The item shares only "steep" with the question, as the other page's sentence does; its passage decides.
    text = lead("Under ISO 3103, how long should tea steep for a sensory test?", [other, guide])
    assert "a steep of 6 minutes" in text, text
    assert "4 minutes" not in text


def test_stemming_is_thread_safe():
    # The pure-Python Snowball stemmer keeps each call's state on the stemmer object: shared by threads, it returns
    # wrong stems (or raises IndexError), and the cache would then keep the wrong stem for the process.
    uncached = stem.__wrapped__
    suffixes = ["", "s", "ing", "ed", "ly", "ness", "ation", "ful", "ies", "ement", "ational", "iveness"]
    rng = random.Random(3103)
    words = [
        "".join(rng.choice("abcdefghilmnoprstuy") for _ in range(rng.randint(3, 9))) + rng.choice(suffixes)
        for _ in range(4000)
    ]
    expected = [uncached(word) for word in words]
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(number: int) -> None:
        try:
            start.wait()
            results[number] = [uncached(word) for word in words]
        except BaseException as error:  # reported below
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(number,)) for number in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]
    for number in range(8):
        wrong = [(w, got, want) for w, got, want in zip(words, results[number], expected, strict=True) if got != want]
        assert not wrong, wrong[:5]


def test_long_runs_of_digits_or_markers_are_read_in_linear_time():
    # A number pattern retried from every digit of a long run is quadratic: 8,000 digits took seconds (and a run of
    # 8,000 backticks, as code markers, longer).
    rng = random.Random(8000)
    digits = "".join(rng.choice("0123456789") for _ in range(8000))
    mixed = "".join(rng.choice("0123456789.,-–: %°$") for _ in range(8192))
    listed = ",".join(str(rng.randint(0, 9)) for _ in range(4000))
    passages = [
        Passage(1, f"The serial number is {digits} on the tin.", "Serial"),
        Passage(2, f"Readings: {mixed} at the end.", "Readings"),
        Passage(3, f"Counts {listed} at the end.", "Counts"),
        Passage(4, f"Markers {'`' * 8000} at the end.", "Markers"),
        # Each "[" started a link text read to the end of the line: 40,000 took about 5 s.
        Passage(5, f"Brackets {'[' * 40000} at the end.", "Brackets"),
    ]
    questions = [
        "How long should tea steep?",
        "How hot should the water be?",
        "What percentage is Assam?",
        "How much leaf per cup?",
        "How many infusions are there?",
        "What does it cost?",
        "What time do you open?",
        "Where is the shop's address?",
    ]
    for question in questions:
        started = time.perf_counter()
        answer(question, passages, 60)
        elapsed = time.perf_counter() - started
        assert elapsed < 1.0, (question, elapsed)


def test_only_a_degree_word_after_how_says_what_kind_of_answer_is_wanted():
    # "How is matcha made?": "matcha" is what the question is about, not the kind of answer wanted.
    assert question_terms("How is matcha made?") == terms("matcha make")
    assert question_terms("Can you explain how matcha is made?") == terms("explain matcha make")
    assert question_terms("How caffeinated is hojicha?") == terms("caffeinated hojicha")
    # "How hot", "how long", "how big": a quantity is asked for, the degree word is not the topic.
    assert question_terms("How hot should the water be for gyokuro?") == terms("water gyokuro")
    assert stem("hot") not in question_terms("How hot should the water be for gyokuro?")
    assert question_terms("How long is fukamushi sencha steamed?") == terms("fukamushi sencha steamed")
    assert question_terms("How big is the kettle?") == terms("kettle")


def test_the_site_section_counts_like_the_title():
    # "in the video" names the kind of page: the sentence of the page in the Videos section leads, not the blog's
    # sentence on the same brew (first, and with as many of the question's words).
    blog = Passage(
        1, "Warm the pot, then add 6 g of leaf to 60 ml of water.", "Why gyokuro is shaded", "", None, "Blog"
    )
    video = Passage(2, "He uses 5 g of leaf and 60 ml of water.", "Brewing gyokuro", "", None, "Videos")
    question = "How much leaf is used in the gyokuro video?"
    assert lead(question, [blog, video]).startswith("He uses 5 g"), lead(question, [blog, video])
    unsectioned = [Passage(1, blog.text, blog.title), Passage(2, video.text, video.title)]
    assert lead(question, unsectioned).startswith("Warm the pot")  # the section is what decides


def test_a_passage_closer_to_the_question_in_meaning_leads():
    # Alike in words (both ship, both name countries); the retriever's similarity of each passage to the question
    # says which one is about where the shop ships.
    question = "Which countries do you ship to?"
    texts = ["Our gift box ships with five teas from five countries.", "We ship to two countries: the US and Canada."]
    assert lead(question, [Passage(1, texts[0]), Passage(2, texts[1])]).startswith("Our gift box")
    near = [Passage(1, texts[0], similarity=0.3), Passage(2, texts[1], similarity=0.7)]
    assert lead(question, near).startswith("We ship to two countries"), lead(question, near)
    # A passage the vector search did not return counts as the least similar one.
    unknown = [
        Passage(1, texts[0], similarity=None),
        Passage(2, texts[1], similarity=0.7),
        Passage(3, "", similarity=0.3),
    ]
    assert lead(question, unknown).startswith("We ship to two countries")


def test_what_time_asks_for_a_clock_time_not_about_time():
    assert question_terms("What time do you open on Saturdays?") == terms("open Saturdays")
    assert question_terms("Which year was the shop founded?") == terms("shop founded")
    assert question_terms("What date is the tasting?") == terms("tasting")
    assert question_terms("What is the best time to pick tea?") == terms("best time pick tea")  # the topic here
    passages = [
        Passage(1, "Every Saturday at 10:00 our class covers steeping time and water.", "Classes"),
        Passage(2, "Saturday: shop 09:00–18:00, tea service 11:00–17:00.", "Contact us", "Opening hours"),
    ]
    text = lead("What time do you open on Saturdays?", passages)
    assert text.startswith("Saturday: shop 09:00"), text  # not the class that mentions "time"


ABOUT_PAGE = Passage(
    1,
    "- **Teach.** Saturday brewing classes, monthly pairing dinners and a growing library of free brewing videos.\n"
    "- **Write.** Our blog covers tea origins, brewing, chemistry, history and food pairing, written by our staff "
    "and a few friends.",
    "About Lantern & Kettle",
)
COLD_BREW = Passage(
    2,
    "Cold brew takes eight to twelve hours in the fridge. Cold-brewed tea rarely clouds, because less of those "
    "compounds were extracted in the first place.",
    "Cold Brew Iced Tea: A Slow Method for Hot Summers",
)


@pytest.mark.parametrize(
    "question",
    [
        "What did we write about cold brew?",
        "What have you written on cold brew?",
        "What do your posts say about cold brew?",
        "Anything published about cold brew?",
    ],
)
def test_asking_what_the_site_wrote_about_a_topic_is_about_the_topic(question):
    # "write about", "written on", "say about": how the question is put, not what it is about. The About page's
    # "Write. Our blog covers ..." shares only the word "write" and led the answer (the README's docs check found it).
    assert stem("write") not in question_terms(question)
    assert stem("cold") in question_terms(question)
    text = lead(question, [ABOUT_PAGE, COLD_BREW])
    assert text.startswith("Cold"), text


def test_a_question_about_writing_itself_keeps_the_word():
    # Only the frame ("write about <topic>") is set aside: a question whose topic is writing keeps it.
    assert stem("write") in question_terms("Who writes the blog?")
    assert lead("Who writes the blog?", [ABOUT_PAGE, COLD_BREW]).startswith("Write"), "the About page answers it"


def test_a_short_sentence_going_on_from_the_last_reads_with_it():
    # "It's harmless." is about the creaming before it; read with the sentence after, it led an answer about cold
    # brew as "It's harmless. Cold-brewed tea rarely clouds ...". A short label ("Assam CTC.") still reads with
    # the sentence after it.
    units = units_of(
        "Caffeine binds with polyphenols and drops out as the tea cools. It's harmless. Cold-brewed tea rarely "
        "clouds, because less was extracted. Assam CTC. Strong and malty, it takes milk well."
    )
    assert units == [
        "Caffeine binds with polyphenols and drops out as the tea cools. It's harmless.",
        "Cold-brewed tea rarely clouds, because less was extracted.",
        "Assam CTC. Strong and malty, it takes milk well.",
    ]
    # At a paragraph's start there is nothing before it to go on from: it reads with the sentence after.
    assert units_of("It's harmless. Cold-brewed tea rarely clouds at all.") == [
        "It's harmless. Cold-brewed tea rarely clouds at all."
    ]
