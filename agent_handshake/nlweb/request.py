"""Reading an NLWeb v0.54 ``/ask`` or ``/await`` body into dataclasses, with the spec's own inconsistencies
accepted as ``../shared/specs/NOTES.md`` decides (README, "NLWeb"):

- ``meta.version`` and ``meta.api_version`` are the same thing;
- ``context.memory`` is a string or a list of strings;
- ``prefer.response_format`` ``conv_search`` and ``conversational_search`` are the same format;
  ``chatgpt_app`` is the other; a list is the formats the client accepts (the first we speak is answered);
  anything else is answered as ``conv_search``;
- ``prefer.mode`` ``summarize`` adds the answer text; every other mode (``list``, the examples' ``detailed``)
  is a list;
- ``/await`` reads ``prefer`` as ``/ask`` does (:class:`Preferences`): a finished job's Answer is formatted as
  the ``/await`` asks.

Query attributes besides ``text`` are schema.org filters: ``itemType`` (the results' ``@type``, or its IRI),
``price`` ("less than $20", "under 20", "$10-$30", "10 to 30", "over 5", "at least 5", "15"), and
``datePublished`` / ``datePublishedAfter`` / ``datePublishedBefore`` (ISO 8601 dates). ``site`` (a string or a
list) names the corpora to search (this site's is the only one). Others the site cannot honour (``location``, the
examples' ``personalized``) are accepted and ignored. Our extension,
``capability`` and ``input``, invokes a MODE3 capability: it is what every result's ``actions[]`` posts.

Every refusal is an :class:`~agent_handshake.concierge.errors.InvalidInput` naming the field.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ..concierge.errors import InvalidInput
from ..concierge.validation import check_query, date_range, moment

VERSION = "0.54"
MAX_TEXT = 4096
MAX_PREVIOUS = 20
MAX_SITES = 100
FORMATS = {"conv_search": "conv_search", "conversational_search": "conv_search", "chatgpt_app": "chatgpt_app"}
ACTIONS = ("checkin", "cancel")

#: A comma before groups of three digits separates thousands ("$1,000", "1,250.50"); otherwise it is a decimal
#: comma ("12,50").
_NUMBER = r"\$?\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)"
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_BELOW = re.compile(rf"^(?:less than|under|below|cheaper than|at most|max(?:imum)?|up to|<=?)\s*{_NUMBER}$")
_ABOVE = re.compile(rf"^(?:more than|over|above|at least|min(?:imum)?|from|>=?)\s*{_NUMBER}$")
_BETWEEN = re.compile(rf"^(?:between\s*)?{_NUMBER}\s*(?:-|–|to|and)\s*{_NUMBER}$")
_EXACT = re.compile(rf"^{_NUMBER}$")
_SCHEMA_ORG = re.compile(r"^(?:https?://(?:www\.)?schema\.org/|schema:)", re.I)


@dataclass(frozen=True)
class PriceRange:
    low: Decimal | None = None
    high: Decimal | None = None


@dataclass(kw_only=True)
class Preferences:
    """``prefer`` (§3.3): how the answer is formatted and delivered, negotiated per request as HTTP content is.
    ``/ask`` reads it, and so does ``/await``: §4.2 says it "returns a standard NLWeb Response", whose Answer §4.1.1
    formats "as specified by the 'response_format' in the request"; its example carries only ``meta``, and a
    request without ``prefer`` gets ``conv_search`` on either."""

    response_format: str = "conv_search"
    mode: str = "list"
    streaming: bool = False
    language: str = ""

    @property
    def summarize(self) -> bool:
        return self.mode == "summarize" or self.response_format == "chatgpt_app"


@dataclass
class Ask(Preferences):
    text: str
    #: ``query.site``: the corpora to search (none named: this site's).
    sites: list[str] = field(default_factory=list)
    item_type: str | None = None
    price: PriceRange | None = None
    published_after: datetime.datetime | None = None
    published_before: datetime.datetime | None = None
    previous: list[str] = field(default_factory=list)
    context_text: str = ""
    memory: list[str] = field(default_factory=list)
    conversation_id: str | None = None
    version: str = VERSION
    #: Our extension: the MODE3 capability to invoke, and its input.
    capability: str | None = None
    input: dict[str, Any] | None = None


@dataclass
class Await(Preferences):
    token: str
    action: str
    version: str = VERSION
    conversation_id: str | None = None


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{name} must be an object.", fields=[name])
    return value


def _string(section: dict[str, Any], key: str, path: str, *, limit: int = 256) -> str | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidInput(f"{path} must be a string of at most {limit} characters.", fields=[path])
    return value


def _strings(value: Any, path: str, *, limit: int = MAX_PREVIOUS, cut: bool = True) -> list[str]:
    """A list of strings, or one string (``context.memory`` comes both ways): its last ``limit`` (the most recent of
    a history), or, when it must not be ``cut`` (``query.site``: every entry counts), refused over ``limit``."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and len(item) <= 1024 for item in items):
        raise InvalidInput(f"{path} must be a string or a list of strings (each at most 1024 long).", fields=[path])
    if not cut and len(items) > limit:
        raise InvalidInput(f"{path} may list at most {limit} entries.", fields=[path])
    return items[-limit:]


def _meta(data: dict[str, Any]) -> tuple[str, str | None]:
    meta = _object(data, "meta")
    # null is absent here as everywhere in the body (clients write their unset optional members as null).
    version = next((meta[key] for key in ("api_version", "version") if meta.get(key) is not None), VERSION)
    if not isinstance(version, (str, int, float)) or isinstance(version, bool):
        raise InvalidInput("meta.api_version must be a version string such as '0.54'.", fields=["meta.api_version"])
    session = {} if meta.get("session_context") is None else meta["session_context"]  # [], "", 0 are not objects
    if not isinstance(session, dict):
        raise InvalidInput("meta.session_context must be an object.", fields=["meta.session_context"])
    conversation = _string(session, "conversation_id", "meta.session_context.conversation_id", limit=128)
    return str(version), conversation or None


def _response_format(value: Any) -> str:
    """``prefer.response_format``: a format, or the formats the client accepts in its order of preference (§3.3.1:
    "a client may specify the formats it can accept and leave it to the NLWeb agent to choose"): the first we
    speak; none of ours is answered as ``conv_search``."""
    names = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(names, list) or len(names) > 20 or not all(isinstance(n, str) and len(n) <= 64 for n in names):
        raise InvalidInput(
            "prefer.response_format must be a format or a list of formats (each at most 64 characters).",
            fields=["prefer.response_format"],
        )
    return next((FORMATS[name.lower()] for name in names if name.lower() in FORMATS), "conv_search")


def schema_org_name(value: str | None) -> str | None:
    """A schema.org type by its name: its IRI (``https://schema.org/Product``, ``http://...``) or compact IRI
    (``schema:Product``), as JSON-LD clients write it, is the name (``Product``)."""
    if value is None:
        return None
    name = _SCHEMA_ORG.sub("", value.strip())
    return name or value


def parse_price(value: Any) -> PriceRange:
    """``query.price`` as a range; a number alone is an upper bound ("something for $20")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return PriceRange(high=Decimal(str(value)))  # finite: the body's parser refuses NaN and 1e400
    # Longer than any constraint: refused before the patterns, which backtrack quadratically over runs of spaces.
    text = value.strip().lower().replace("usd", "").strip() if isinstance(value, str) and len(value) <= 100 else ""

    def number(raw: str) -> Decimal:
        try:
            return Decimal(raw.replace(",", "") if _THOUSANDS.match(raw) else raw.replace(",", "."))
        except InvalidOperation:  # pragma: no cover - the patterns only match digits
            raise InvalidInput("query.price: not a number.", fields=["query.price"]) from None

    if match := _BELOW.match(text):
        return PriceRange(high=number(match.group(1)))
    if match := _ABOVE.match(text):
        return PriceRange(low=number(match.group(1)))
    if match := _BETWEEN.match(text):
        low, high = sorted((number(match.group(1)), number(match.group(2))))
        return PriceRange(low=low, high=high)
    if match := _EXACT.match(text):
        return PriceRange(high=number(match.group(1)))
    raise InvalidInput(
        f"query.price: {str(value)[:60]!r} is not a price constraint; use e.g. 'less than $20', 'over 5', "
        "'$10-$30' or a number.",
        fields=["query.price"],
    )


def parse_ask(data: dict[str, Any]) -> Ask:
    """An ``/ask`` body (already a checked JSON object: see ``concierge.validation.load_object``)."""
    query = _object(data, "query")
    if "query" not in data:
        raise InvalidInput("query is required: {'query': {'text': '...'}}.", code="missing_field", fields=["query"])
    text = query.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("query.text is required: the question, as text.", fields=["query.text"])
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"query.text is over {MAX_TEXT} characters.", fields=["query.text"])
    check_query(text, "query.text")
    ask = Ask(text=text)
    sites = _strings(query.get("site"), "query.site", limit=MAX_SITES, cut=False)
    ask.sites = [site for site in sites if site.strip()]
    ask.item_type = schema_org_name(_string(query, "itemType", "query.itemType", limit=100))
    if query.get("price") is not None:
        ask.price = parse_price(query["price"])
    _read_dates(query, ask)
    ask.capability = _string(query, "capability", "query.capability", limit=64)
    if query.get("input") is not None:
        if not isinstance(query["input"], dict):
            raise InvalidInput("query.input must be an object.", fields=["query.input"])
        ask.input = query["input"]

    context = _object(data, "context")
    ask.previous = _strings(context.get("prev"), "context.prev")
    ask.context_text = _string(context, "text", "context.text", limit=2048) or ""
    ask.memory = _strings(context.get("memory"), "context.memory")

    _read_prefer(data, ask)
    ask.version, ask.conversation_id = _meta(data)
    return ask


def _read_dates(query: dict[str, Any], ask: Ask) -> None:
    """``datePublished`` (the day), ``datePublishedAfter`` and ``datePublishedBefore``: each is a constraint the
    results meet, together the moments all of them allow (a bound narrows the day, never widens it); null is
    absent. Bounds that leave no moment are refused, naming the fields given."""
    after = before = None
    given = []
    day = moment(query.get("datePublished"), "query.datePublished")
    if day is not None:
        given.append("query.datePublished")
        after = day
        # Up to the last microsecond of the day: the retrieval's upper bound is inclusive, and the next midnight
        # is the next day (content with a date and no time, a ``DateField``, is published at midnight). The last
        # day there is (9999-12-31) has no day after it: no upper bound then.
        before = day + datetime.timedelta(days=1, microseconds=-1) if day.date() < datetime.date.max else None
    start = moment(query.get("datePublishedAfter"), "query.datePublishedAfter")
    if start is not None:
        given.append("query.datePublishedAfter")
        after = start if after is None else max(after, start)
    end = moment(query.get("datePublishedBefore"), "query.datePublishedBefore")
    if end is not None:
        given.append("query.datePublishedBefore")
        before = end if before is None else min(before, end)
    date_range(after, before, given)
    ask.published_after, ask.published_before = after, before


def _read_prefer(data: dict[str, Any], preferences: Preferences) -> None:
    """``prefer`` into ``preferences`` (an ``Ask`` or an ``Await``)."""
    prefer = _object(data, "prefer")
    preferences.response_format = _response_format(prefer.get("response_format"))
    preferences.mode = (_string(prefer, "mode", "prefer.mode", limit=64) or "list").lower()
    streaming = False if prefer.get("streaming") is None else prefer["streaming"]  # null is absent
    if not isinstance(streaming, bool):
        raise InvalidInput("prefer.streaming must be true or false.", fields=["prefer.streaming"])
    preferences.streaming = streaming
    preferences.language = _string(prefer, "accept-language", "prefer.accept-language", limit=35) or ""


def parse_await(data: dict[str, Any]) -> Await:
    token = data.get("promise_token")
    if not isinstance(token, str) or not token or len(token) > 128:
        raise InvalidInput("promise_token is required: the token of a Promise.", fields=["promise_token"])
    action = "checkin" if data.get("action") is None else data["action"]  # null is absent
    if not isinstance(action, str) or action.lower() not in ACTIONS:
        raise InvalidInput("action must be 'checkin' or 'cancel'.", fields=["action"])
    version, conversation = _meta(data)
    wait = Await(token=token, action=action.lower(), version=version, conversation_id=conversation)
    _read_prefer(data, wait)
    return wait
