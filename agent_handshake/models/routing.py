"""Routing examples: phrasings an operator adds to teach the router which capability a request is for."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

#: A routing example is a request, not a document: longer texts are cut by the model's 256 tokens anyway.
EXAMPLE_MAX_CHARS = 500


class RoutingExampleManager(models.Manager["RoutingExample"]):
    def get_by_natural_key(self, capability: str, text: str) -> RoutingExample:
        return self.get(capability=capability, text=text)


class RoutingExample(models.Model):
    """A request that should go to ``capability``, kept beside the examples the capability declares in code.

    The router ranks a capability by its texts (intent, description, examples); a site adds its own here, in the
    admin, with ``loaddata`` (the natural key is the capability and the text, so a fixture loads again without
    duplicates) or from code. Examples are the site's, not the capability's: they are not published in the
    manifests."""

    capability = models.CharField(_("capability"), max_length=64, db_index=True)
    text = models.TextField(_("request"), max_length=EXAMPLE_MAX_CHARS)
    #: Where the example came from ("agent traffic, March", "bench/data/routing.json"): for the operators.
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)

    objects = RoutingExampleManager()

    class Meta:
        ordering = ["capability", "pk"]
        verbose_name = _("routing example")
        verbose_name_plural = _("routing examples")
        constraints = [models.UniqueConstraint(fields=["capability", "text"], name="ah_routingexample_unique")]

    def __str__(self) -> str:
        return f"{self.capability}: {self.text}"

    def natural_key(self) -> tuple[str, str]:
        return (self.capability, self.text)
