"""Public signals: extension points for sites that use the app.

``document_indexed``
    Sent after a registered object's agent document is created or changed.
    Arguments: ``sender`` (the registered model), ``document`` (a :class:`~agent_handshake.models.Document`),
    ``created`` (bool).

``document_removed``
    Sent after a registered object's agent document is deleted (the object was deleted or left the config's
    queryset). Arguments: ``sender`` (the registered model), ``object_id`` (str).
"""

from django.dispatch import Signal

document_indexed = Signal()
document_removed = Signal()
