"""``agent_handshake.models`` says everything is importable from it: every model of its modules, abstract bases
(the replay guards' SpentValue) too, is there and in ``__all__``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from django.db import models

import agent_handshake.models as package


def test_every_model_of_the_package_is_importable_from_it():
    defined = set()
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        defined |= {
            name
            for name, value in vars(module).items()
            if inspect.isclass(value) and issubclass(value, models.Model) and value.__module__ == module.__name__
        }
    assert "SpentValue" in defined
    assert defined - set(package.__all__) == set()
    assert all(getattr(package, name).__name__ == name for name in defined)
