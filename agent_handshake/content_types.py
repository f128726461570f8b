"""The AHP content type registry (Appendix C): which payload fields each type needs, and how a payload is built.

A registered model declares the AHP content type of its items and maps the type's payload fields to its own
attributes (``ContentConfig.payload_fields``). The system checks use :data:`CONTENT_TYPES` to report a type
whose required fields are not mapped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TYPE_PATTERN = re.compile(r"^(text|application|media|file|x-[a-z][a-z0-9-]*)/[a-z][a-z0-9_-]*$")

VIDEO_FORMATS = {".m3u8": "hls", ".mpd": "dash", ".mp4": "mp4", ".webm": "webm", ".mov": "mov"}
AUDIO_FORMATS = {".mp3": "mp3", ".ogg": "ogg", ".oga": "ogg", ".aac": "aac", ".m4a": "aac", ".flac": "flac"}


def _format_from_url(url: str | None, formats: dict[str, str]) -> str | None:
    if not url:
        return None
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    for suffix, name in formats.items():
        if path.endswith(suffix):
            return name
    return None


def _media_payload(formats: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def build(values: dict[str, Any]) -> dict[str, Any]:
        payload = dict(values)
        payload.setdefault("format", _format_from_url(payload.get("stream_url"), formats))
        return payload

    return build


def _image_payload(values: dict[str, Any]) -> dict[str, Any]:
    image_keys = {"url", "alt", "width", "height", "format", "title"}
    image = {key: value for key, value in values.items() if key in image_keys}
    payload = {key: value for key, value in values.items() if key not in image_keys}
    payload["images"] = [image]
    payload.setdefault("layout", "single")
    return payload


def _data_payload(values: dict[str, Any]) -> dict[str, Any]:
    schema = values.pop("schema", None)
    payload: dict[str, Any] = {"data": values.pop("data", None) or values}
    if schema:
        payload["schema"] = schema
    return payload


@dataclass(frozen=True)
class ContentTypeSpec:
    name: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    build: Callable[[dict[str, Any]], dict[str, Any]] = field(default=dict)
    #: Whether registered content may use it (``application/action-result`` is for MODE3 results only).
    for_content: bool = True


CONTENT_TYPES: dict[str, ContentTypeSpec] = {
    spec.name: spec
    for spec in (
        ContentTypeSpec("text/answer"),
        ContentTypeSpec("application/feed", optional=("thumbnail_url", "metadata")),
        ContentTypeSpec("application/data", required=("data",), optional=("schema",), build=_data_payload),
        ContentTypeSpec(
            "media/video",
            required=("stream_url", "duration_seconds"),
            optional=(
                "format",
                "width",
                "height",
                "thumbnail_url",
                "subtitles",
                "chapters",
                "alternate_formats",
            ),
            build=_media_payload(VIDEO_FORMATS),
        ),
        ContentTypeSpec(
            "media/audio",
            required=("stream_url", "duration_seconds"),
            optional=("format", "thumbnail_url", "transcript_url", "chapters"),
            build=_media_payload(AUDIO_FORMATS),
        ),
        ContentTypeSpec(
            "media/image",
            required=("url", "alt"),
            optional=("width", "height", "format", "title", "layout"),
            build=_image_payload,
        ),
        ContentTypeSpec(
            "file/download",
            required=("url", "filename", "mime_type"),
            optional=("size_bytes", "checksum", "expires_at"),
        ),
        ContentTypeSpec("application/action-result", for_content=False),
    )
}


def get_spec(content_type: str) -> ContentTypeSpec | None:
    """The registry entry for ``content_type``; ``x-`` extension types get an entry with no requirements."""
    if content_type in CONTENT_TYPES:
        return CONTENT_TYPES[content_type]
    if content_type.startswith("x-") and TYPE_PATTERN.match(content_type):
        return ContentTypeSpec(content_type)
    return None
