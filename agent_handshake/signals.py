"""Public signals: extension points for sites that use the app.

``document_indexed``
    Sent after a registered object's agent document is created or changed.
    Arguments: ``sender`` (the registered model), ``document`` (a :class:`~agent_handshake.models.Document`),
    ``created`` (bool).

``document_removed``
    Sent after a registered object's agent document is deleted (the object was deleted or left the config's
    queryset). Arguments: ``sender`` (the registered model), ``object_id`` (str).

``model_registered``
    Sent when a model is registered after the models are loaded (in an ``agents`` module, an app's ``ready()``, a
    test). Arguments: ``sender`` (the model), ``config`` (its :class:`~agent_handshake.registry.ContentConfig`).
    The app's own receiver connects the model's save and delete receivers, so its edits are indexed whenever it
    was registered.
"""

from django.dispatch import Signal

document_indexed = Signal()
document_removed = Signal()
model_registered = Signal()
