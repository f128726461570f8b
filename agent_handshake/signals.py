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
    The app's own receivers connect the model's save and delete receivers and bring the built-in capabilities in
    step (the model's ``get_<model>`` capability, ``site_info``'s pages), so a model registered after start-up is
    indexed and offered as one registered before.

``model_unregistered``
    Sent when a model is unregistered. Arguments: ``sender`` (the model), ``config`` (the
    :class:`~agent_handshake.registry.ContentConfig` it had). The app's own receiver takes its generated capability
    away again.

``registry_changed``
    Sent after the content registry or the capability registry changed: a model or a capability registered or
    unregistered, whenever that is. Arguments: ``sender`` (the registry). The app's own receiver drops this
    process's snapshot of the site (:mod:`agent_handshake.state`), so the manifest, llms.txt, the MCP tools and
    /openapi.json follow the change at once rather than after ``STATE_TTL``.
"""

from django.dispatch import Signal

document_indexed = Signal()
document_removed = Signal()
model_registered = Signal()
model_unregistered = Signal()
registry_changed = Signal()
