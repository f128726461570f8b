from django.db import models


class BeirDocument(models.Model):
    """A document of a BEIR corpus, registered like any site content so retrieval runs the site's code path."""

    doc_id = models.CharField(max_length=64, unique=True)
    title = models.TextField(blank=True)
    text = models.TextField()

    def __str__(self):
        return self.title or self.doc_id

    def get_absolute_url(self):
        return f"/beir/{self.doc_id}/"
