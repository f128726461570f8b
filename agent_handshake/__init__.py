"""Make a Django content site ready for AI agents (the Agent Handshake Protocol and friends).

The public API::

    import agent_handshake

    @agent_handshake.register(Article)
    class ArticleContent(agent_handshake.ContentConfig):
        ...

    @agent_handshake.capability(description=..., action_type="query", input_schema=..., output_schema=...)
    def order_status(invocation):
        return agent_handshake.Outcome({...}, answer="...")
"""

from .concierge.invocation import ActionFailed, Deferred, Invocation, Outcome, capability
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
    "ActionFailed",
    "Capability",
    "ContentConfig",
    "Deferred",
    "Invocation",
    "NotRegistered",
    "Outcome",
    "__version__",
    "capability",
    "capability_registry",
    "content_registry",
    "is_registered",
    "register",
    "register_capability",
    "unregister",
]
