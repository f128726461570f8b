"""Test models kept out of the project's app registry (and so out of its migrations and system checks).

A model whose ``Meta.apps`` is a bare ``Apps()`` is enough where nothing follows its relations. Where something
does (``ContentConfig.follow``, a delete's cascade), the registry needs an app config for the models' label, or
the models are missing from its relation graph: :func:`isolated_apps` makes one. The tables are created for one
test by the ``create_tables`` fixture (``tests/conftest.py``), inside the test's transaction.
"""

from __future__ import annotations

import sys

from django.apps import AppConfig
from django.apps.registry import Apps


def isolated_apps(label: str, module: str) -> Apps:
    """An app registry of its own holding the app ``label``, whose models are defined in ``module``."""
    registry = Apps()
    config = AppConfig(f"tests.{label}", sys.modules[module])
    config.label, config.apps, config.models = label, registry, registry.all_models[label]
    registry.app_configs[label] = config
    return registry
