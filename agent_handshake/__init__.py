"""Make a Django content site ready for AI agents (the Agent Handshake Protocol and friends).

The public API::

    import agent_handshake

    @agent_handshake.register(Article)
    class ArticleContent(agent_handshake.ContentConfig):
        ...
"""

from .registry import (
    Capability,
    ContentConfig,
    NotRegistered,
    capability_registry,
    content_registry,
)

__version__ = "0.1.0.dev0"

register = content_registry.register
unregister = content_registry.unregister
is_registered = content_registry.is_registered
register_capability = capability_registry.register

__all__ = [
    "Capability",
    "ContentConfig",
    "NotRegistered",
    "__version__",
    "capability_registry",
    "content_registry",
    "is_registered",
    "register",
    "register_capability",
    "unregister",
]
