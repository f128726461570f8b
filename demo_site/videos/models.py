from django.db import models
from django.urls import reverse
from django.utils import timezone


class Video(models.Model):
    title = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    description = models.TextField(help_text="Markdown: what the video shows, for people and agents")
    stream_url = models.URLField(max_length=500)
    thumbnail_url = models.URLField(max_length=500, blank=True)
    duration_seconds = models.PositiveIntegerField()
    width = models.PositiveIntegerField(default=1920)
    height = models.PositiveIntegerField(default=1080)
    #: [{"lang": "en", "url": "https://.../en.vtt"}, ...]
    subtitles = models.JSONField(default=list, blank=True)
    #: [{"title": "Warming the pot", "start_seconds": 0}, ...]
    chapters = models.JSONField(default=list, blank=True)
    published_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-published_at"]

    def __str__(self):
        return self.title

    def get_absolute_url(self):
        return reverse("videos:video", args=[self.slug])
