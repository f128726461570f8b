"""Requests that only name a topic ("tea", "green tea", "tasting", "orders").

Such a request (at most ``ROUTING_TOPIC_WORDS`` words, no digit: :func:`names_a_topic`) asks for no action: with a
default, no action capability competes for it, and it is answered as a question (the answering capabilities by the
usual rule, then the default: :func:`~.decision.route`). Its fit cannot tell it from an action: the vector of a word
or two is its object's, and fits the action whose examples name that object as well as a request for the action does
("tasting" fits book_appointment about as well as "book tasting" does, and "tea" fits it too, whose examples say "tea
tasting"), so an anonymous agent asking about "tea" would be refused a booking with a 401.

The form tells them apart: an action is something to do (a verb) and something to do it to, or input for it (a
number: an order, a quantity, a date); a word or two with no number names a thing, and what the site can say about a
thing is its content. Two words that do ask for an action ("book tasting", "order status", "human") are answered as
questions too (how to book, how to track an order, how to reach the shop); a request in a sentence, or with a number
("track LK-1234"), is routed by its fit, and a 401 for an action it asks of an anonymous agent ("where is my order
LK-1234") is right. The rule reads the text the site embeds: an agent's own ``intent_vector`` is routed as it is.
"""

from __future__ import annotations

import re

from ...conf import app_settings

#: Scripts written without spaces between words (Han, hiragana, katakana): each of their characters counts as a
#: word in :func:`names_a_topic` (two characters are a word or two; a sentence is many).
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
TOPIC_WORD = re.compile(rf"[{UNSPACED}]|[^\W\d_{UNSPACED}]+")


def names_a_topic(text: str) -> bool:
    """Whether a request only names a topic ("tea", "green tea"): at least one and at most ``ROUTING_TOPIC_WORDS``
    words (runs of letters, or characters of a script written without spaces), and no digit, which would be input
    for an action (an order number, a quantity, a date). See the module's docstring."""
    limit = app_settings.ROUTING_TOPIC_WORDS
    if not limit or any(char.isdigit() for char in text):
        return False
    return 0 < len(TOPIC_WORD.findall(text)) <= limit
