"""Test models kept out of the project's app registry (and so out of its migrations and system checks).

A model whose ``Meta.apps`` is a bare ``Apps()`` is enough where nothing follows its relations. Where something
does (``ContentConfig.follow``, a delete's cascade), the registry needs an app config for the models' label, or
the models are missing from its relation graph: :func:`isolated_apps` makes one, and :func:`isolated_model` an
abstract model whose subclasses are that app's models without a ``Meta`` of their own. The tables are created for
one test by the ``create_tables`` fixture (``tests/conftest.py``), inside the test's transaction.
"""

from __future__ import annotations

import sys

from django.apps import AppConfig
from django.apps.registry import Apps
from django.db import models


def isolated_apps(label: str, module: str) -> Apps:
    """An app registry of its own holding the app ``label``, whose models are defined in ``module``."""
    registry = Apps()
    config = AppConfig(f"tests.{label}", sys.modules[module])
    config.label, config.apps, config.models = label, registry, registry.all_models[label]
    registry.app_configs[label] = config
    return registry


class Shown:
    """What a registered test model needs besides its fields: its title (or, without one, its name) as its text, and
    a URL, ``/<model>/<pk>/``, the same for a row whichever proxy of its model it is read through."""

    def __str__(self) -> str:
        return self.title if hasattr(self, "title") else self.name

    def get_absolute_url(self) -> str:
        return f"/{self._meta.concrete_model._meta.model_name}/{self.pk}/"


def isolated_model(label: str, module: str) -> type[models.Model]:
    """An abstract model whose subclasses, defined in ``module``, are models of the app ``label`` in a registry of
    its own (:func:`isolated_apps`), shown as :class:`Shown` says. They need no ``Meta``, a child of multi-table
    inheritance neither; a proxy's is ``class Meta(Base.Meta): proxy = True``."""
    meta = type("Meta", (), {"abstract": True, "app_label": label, "apps": isolated_apps(label, module)})
    return type(f"{label.title()}Model", (Shown, models.Model), {"__module__": module, "Meta": meta})
