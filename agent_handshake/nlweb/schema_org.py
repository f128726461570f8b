"""NLWeb result objects: each retrieved document as a schema.org typed object, built from the index.

The ``@type`` is the object's own ``ContentConfig.get_schema_type`` (else one inferred from its AHP content type);
``name``, ``url``, ``description``, ``datePublished`` come from every document, and the payload adds what the
type carries: a Product's ``sku``, ``image`` and ``offers`` (price, currency, availability), a VideoObject's
``duration`` (ISO 8601), ``contentUrl``, ``thumbnailUrl`` and ``uploadDate``, an image's or a file's
``contentUrl``... ``grounding`` names where the item comes from: ``{"source_urls": [its page]}``.

Content is untrusted wherever it is re-emitted: text loses markup and control characters, and a URL is kept
only if it is the site's own path or an ``http(s)`` URL (no ``javascript:``, ``data:``).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..concierge.backends import CONTROL, strip_markup
from ..concierge.documents import published_day
from ..concierge.search_scope import rendered_type

if TYPE_CHECKING:
    from ..models import Document

CONTEXT = "https://schema.org"
IN_STOCK, OUT_OF_STOCK = "https://schema.org/InStock", "https://schema.org/OutOfStock"


def text(value: Any, limit: int = 2000) -> str:
    """Untrusted text as plain text: no markup, no control characters, at most ``limit`` characters."""
    return CONTROL.sub("", strip_markup(str(value))).strip()[:limit]


def safe_url(value: Any, base_url: str) -> str | None:
    """An absolute ``http(s)`` URL, the site's own path made absolute, or None."""
    if not isinstance(value, str) or not value or any(char in value for char in "\\\r\n\t ") or CONTROL.search(value):
        return None
    if value.startswith("/") and not value.startswith("//"):
        return base_url + value
    parts = urlsplit(value)
    return value if parts.scheme in ("http", "https") and parts.netloc and "@" not in parts.netloc else None


def iso_duration(seconds: Any) -> str | None:
    try:
        total = int(seconds)
    except (TypeError, ValueError):
        return None
    if total < 0:
        return None
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return "PT" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "") + f"{secs}S"


def _price(value: Any) -> str | None:
    try:
        return str(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return None


def schema_type(document: Document) -> str:
    return rendered_type(document.schema_type, document.ahp_content_type)


def item(document: Document, base_url: str) -> dict[str, Any]:
    """``document`` as a schema.org object (see the module docstring)."""
    url = safe_url(document.url, base_url) or base_url + "/"
    result: dict[str, Any] = {"@context": CONTEXT, "@type": schema_type(document), "name": text(document.title, 500)}
    result["url"] = url
    if document.summary:
        result["description"] = text(document.summary)
    if document.published_at:
        result["datePublished"] = published_day(document)
    payload = document.payload if isinstance(document.payload, dict) else {}
    kind = document.ahp_content_type
    if kind == "application/data":
        _data(result, payload.get("data") if isinstance(payload.get("data"), dict) else {}, base_url)
    elif kind in ("media/video", "media/audio"):
        _media(result, payload, base_url, document)
    elif kind == "media/image":
        images = payload.get("images") or [{}]
        first = images[0] if isinstance(images[0], dict) else {}
        if content_url := safe_url(first.get("url"), base_url):
            result["contentUrl"] = content_url
        if first.get("alt"):
            result["caption"] = text(first["alt"], 500)
    elif kind == "file/download":
        if content_url := safe_url(payload.get("url"), base_url):
            result["contentUrl"] = content_url
        if payload.get("mime_type"):
            result["encodingFormat"] = text(payload["mime_type"], 100)
        if isinstance(payload.get("size_bytes"), int):
            result["contentSize"] = f"{payload['size_bytes']} B"
    result["grounding"] = {"source_urls": [url]}
    return result


def _data(result: dict[str, Any], data: dict[str, Any], base_url: str) -> None:
    """A structured payload (``application/data``): its schema.org-shaped fields, and a price as an Offer."""
    if data.get("sku"):
        result["sku"] = text(data["sku"], 100)
    if data.get("category"):
        result["category"] = text(data["category"], 200)
    image = safe_url(data.get("image_url") or data.get("image"), base_url)
    if image:
        result["image"] = image
    price = _price(data.get("price"))
    if price is not None:
        offer: dict[str, Any] = {"@type": "Offer", "price": price, "url": result["url"]}
        if data.get("currency"):
            offer["priceCurrency"] = text(data["currency"], 3).upper()
        in_stock = data.get("in_stock")
        if isinstance(in_stock, bool):
            offer["availability"] = IN_STOCK if in_stock else OUT_OF_STOCK
        if isinstance(data.get("stock"), int) and not isinstance(data.get("stock"), bool):
            offer["inventoryLevel"] = {"@type": "QuantitativeValue", "value": data["stock"]}
        result["offers"] = offer


def _media(result: dict[str, Any], payload: dict[str, Any], base_url: str, document: Document) -> None:
    if duration := iso_duration(payload.get("duration_seconds")):
        result["duration"] = duration
    if content_url := safe_url(payload.get("stream_url"), base_url):
        result["contentUrl"] = content_url
    if thumbnail := safe_url(payload.get("thumbnail_url"), base_url):
        result["thumbnailUrl"] = thumbnail
        result["image"] = thumbnail
    if payload.get("format"):
        result["encodingFormat"] = text(payload["format"], 20)
    for key, name in (("width", "width"), ("height", "height")):
        if isinstance(payload.get(key), int) and not isinstance(payload.get(key), bool):
            result[name] = payload[key]
    if document.published_at:
        result["uploadDate"] = published_day(document)
