"""The app's models, one module per concern; everything is importable from ``agent_handshake.models``."""

from .content import (
    SIGNAL_NAMES,
    ContentSignalOverride,
    Document,
    EmbeddingIndex,
    LexemeStat,
    Passage,
    Posting,
    SiteProfile,
)
from .conversations import (
    ConverseSession,
    IntentNonce,
    Interaction,
    TrustedActorKey,
    _session_id,
    validate_ed25519_public_key,
)
from .identity import (
    AgentClient,
    AgentSession,
    ApiKey,
    ApiKeyManager,
    PendingHandshake,
    SeenSignature,
    SiteKeyRecord,
    SpentValue,
    TrustEvent,
    VerifiedAgent,
)
from .insights import (
    LATENCY_BUCKETS_MS,
    AgentKind,
    AgentRequest,
    ContentGap,
    DailyCitation,
    DailyTraffic,
    Outcome,
)
from .jobs import CancelRequest, DeskRequest, IdempotencyRecord, Job
from .retention import Forgettable
from .routing import RoutingExample
from .schema_templates import ProposedField, SchemaKeyText, SchemaTemplate, UnmappedFragment

__all__ = [
    "LATENCY_BUCKETS_MS",
    "SIGNAL_NAMES",
    "AgentClient",
    "AgentKind",
    "AgentRequest",
    "AgentSession",
    "ApiKey",
    "ApiKeyManager",
    "CancelRequest",
    "ContentGap",
    "ContentSignalOverride",
    "ConverseSession",
    "DailyCitation",
    "DailyTraffic",
    "DeskRequest",
    "Document",
    "EmbeddingIndex",
    "Forgettable",
    "IdempotencyRecord",
    "IntentNonce",
    "Interaction",
    "Job",
    "LexemeStat",
    "Outcome",
    "Passage",
    "PendingHandshake",
    "Posting",
    "ProposedField",
    "RoutingExample",
    "SchemaKeyText",
    "SchemaTemplate",
    "SeenSignature",
    "SiteKeyRecord",
    "SiteProfile",
    "SpentValue",
    "TrustEvent",
    "TrustedActorKey",
    "UnmappedFragment",
    "VerifiedAgent",
    "_session_id",
    "validate_ed25519_public_key",
]
