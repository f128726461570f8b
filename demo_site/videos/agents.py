import agent_handshake

from .models import Video


@agent_handshake.register(Video)
class VideoContent(agent_handshake.ContentConfig):
    content_type = "media/video"
    schema_type = "VideoObject"
    title_field = "title"
    body_field = "description"
    published_field = "published_at"
    payload_fields = {
        "stream_url": "stream_url",
        "duration_seconds": "duration_seconds",
        "width": "width",
        "height": "height",
        "thumbnail_url": "thumbnail_url",
        "subtitles": "subtitles",
        "chapters": "chapters",
        "title": "title",
        "published_at": "published_at",
    }
    section = "Videos"
    section_description = "Brewing lessons and tea-craft videos, with subtitles and chapters."
    order = 20

    def get_summary(self, video):
        minutes = round(video.duration_seconds / 60)
        first_line = video.description.strip().split("\n", 1)[0]
        return f"{minutes} min video. {first_line}"
