from django.db import models


class Article(models.Model):
    title = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    summary = models.CharField(max_length=300, blank=True)
    body = models.TextField(blank=True)
    published = models.BooleanField(default=True)
    published_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.title

    def get_absolute_url(self):
        return f"/articles/{self.slug}/"


class Report(models.Model):
    """What the test-only async capability ``compile_report`` writes: one row per job that finished."""

    job_id = models.CharField(max_length=64, unique=True)
    topic = models.CharField(max_length=200)
    worker_pid = models.IntegerField()

    def __str__(self):
        return self.topic
