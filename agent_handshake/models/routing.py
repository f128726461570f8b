"""Routing examples: phrasings an operator adds to teach the router which capability a request is for."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

#: A routing example is a request, not a document: longer texts are cut by the model's 256 tokens anyway.
EXAMPLE_MAX_CHARS = 500


class RoutingExampleManager(models.Manager["RoutingExample"]):
    def get_by_natural_key(self, text: str) -> RoutingExample:
        return self.get(text=text)


class RoutingExample(models.Model):
    """A request that should go to ``capability``, kept beside the examples the capability declares in code.

    The router ranks a capability by its texts (intent, description, examples); a site adds its own here, in the
    admin, with ``loaddata`` (the text is the natural key: a fixture loads again without duplicates, and one that
    files a request under another capability moves it) or from code. A request is for one capability, so a text is
    filed once. Examples are the site's, not the capability's: they are not published in the manifests."""

    capability = models.CharField(_("capability"), max_length=64, db_index=True)
    text = models.CharField(_("request"), max_length=EXAMPLE_MAX_CHARS, unique=True)
    #: Where the example came from ("agent traffic, March", "bench/data/routing.json"): for the operators.
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)

    objects = RoutingExampleManager()

    class Meta:
        ordering = ["capability", "pk"]
        verbose_name = _("routing example")
        verbose_name_plural = _("routing examples")

    def __str__(self) -> str:
        return f"{self.capability}: {self.text}"

    def save(self, *args: object, **kwargs: object) -> None:
        self.text = self.text.strip()  # " x" is "x": however it was added (the admin, a fixture, code)
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def natural_key(self) -> tuple[str]:
        return (self.text,)
