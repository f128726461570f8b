"""The NLWeb v0.54 front door: ``POST /ask`` and ``POST /await`` (see :mod:`.views`)."""
