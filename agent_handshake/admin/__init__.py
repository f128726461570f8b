"""The app's pages in the Django admin, one module per concern. Django's autodiscovery imports this package, and
importing each module registers its admins:

- ``site_content``: the site profile with its content signals, and the documents agents see (read-only);
- ``api_keys``: agent clients and the API keys they hold;
- ``verified_agents``: agents that proved their DID, and the trust an operator sets, pins or blocks;
- ``concierge``: async jobs and their callbacks, the human desk, and the routing examples;
- ``intentweb``: the trusted actors' keys and the interactions;
- ``schema_templates``: the key texts editors write, and the keys proposed from what agents put in "other".

The agent traffic pages (the overview, each agent's page, the CSV export) and the content gaps are registered by
``agent_handshake.insights``, beside the queries they show. ``only_what_changed`` holds what several change pages
share: saving only the fields an editor changed.

A site that wants another page for one of these models unregisters it and registers a subclass of the admin
named here.
"""

from __future__ import annotations

from ..insights import admin as insights_admin  # the agent traffic pages
from ..insights import gaps_admin  # the content gaps
from .api_keys import AgentClientAdmin, ApiKeyAdmin
from .concierge import DeskRequestAdmin, JobAdmin, RoutingExampleAdmin
from .intentweb import InteractionAdmin, TrustedActorKeyAdmin
from .schema_templates import ProposedFieldAdmin, SchemaTemplateAdmin
from .site_content import DocumentAdmin, SiteProfileAdmin
from .verified_agents import VerifiedAgentAdmin

__all__ = [
    "AgentClientAdmin",
    "ApiKeyAdmin",
    "DeskRequestAdmin",
    "DocumentAdmin",
    "InteractionAdmin",
    "JobAdmin",
    "ProposedFieldAdmin",
    "RoutingExampleAdmin",
    "SchemaTemplateAdmin",
    "SiteProfileAdmin",
    "TrustedActorKeyAdmin",
    "VerifiedAgentAdmin",
    "gaps_admin",
    "insights_admin",
]
