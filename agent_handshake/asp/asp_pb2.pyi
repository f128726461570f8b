from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class IntentMessage(_message.Message):
    __slots__ = ("id", "intent_vector", "capabilities", "did", "payload", "timestamp", "trust_score", "metadata", "signature")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    INTENT_VECTOR_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TRUST_SCORE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    id: str
    intent_vector: _containers.RepeatedScalarFieldContainer[float]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    did: str
    payload: str
    timestamp: int
    trust_score: float
    metadata: _containers.ScalarMap[str, str]
    signature: bytes
    def __init__(self, id: _Optional[str] = ..., intent_vector: _Optional[_Iterable[float]] = ..., capabilities: _Optional[_Iterable[str]] = ..., did: _Optional[str] = ..., payload: _Optional[str] = ..., timestamp: _Optional[int] = ..., trust_score: _Optional[float] = ..., metadata: _Optional[_Mapping[str, str]] = ..., signature: _Optional[bytes] = ...) -> None: ...

class HandshakeMessage(_message.Message):
    __slots__ = ("agent_id", "did", "capabilities", "version", "timestamp", "public_key", "challenge", "challenge_response", "access_token", "expires_in")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    CHALLENGE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    did: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    version: str
    timestamp: int
    public_key: bytes
    challenge: bytes
    challenge_response: bytes
    access_token: str
    expires_in: int
    def __init__(self, agent_id: _Optional[str] = ..., did: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ..., timestamp: _Optional[int] = ..., public_key: _Optional[bytes] = ..., challenge: _Optional[bytes] = ..., challenge_response: _Optional[bytes] = ..., access_token: _Optional[str] = ..., expires_in: _Optional[int] = ...) -> None: ...

class NegotiationResponse(_message.Message):
    __slots__ = ("request_id", "agent_id", "accepted", "workflow_steps", "did", "response_vector", "timestamp", "reason", "trust_delta", "signature")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STEPS_FIELD_NUMBER: _ClassVar[int]
    DID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRUST_DELTA_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    agent_id: str
    accepted: bool
    workflow_steps: _containers.RepeatedScalarFieldContainer[str]
    did: str
    response_vector: _containers.RepeatedScalarFieldContainer[float]
    timestamp: int
    reason: str
    trust_delta: float
    signature: bytes
    def __init__(self, request_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., workflow_steps: _Optional[_Iterable[str]] = ..., did: _Optional[str] = ..., response_vector: _Optional[_Iterable[float]] = ..., timestamp: _Optional[int] = ..., reason: _Optional[str] = ..., trust_delta: _Optional[float] = ..., signature: _Optional[bytes] = ...) -> None: ...

class WorkflowMessage(_message.Message):
    __slots__ = ("workflow_id", "step_id", "next_step_id", "agent_id", "did", "action", "params", "result_chan", "timestamp")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_STEP_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RESULT_CHAN_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    step_id: str
    next_step_id: str
    agent_id: str
    did: str
    action: str
    params: _containers.ScalarMap[str, str]
    result_chan: str
    timestamp: int
    def __init__(self, workflow_id: _Optional[str] = ..., step_id: _Optional[str] = ..., next_step_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., did: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., result_chan: _Optional[str] = ..., timestamp: _Optional[int] = ...) -> None: ...

class CapabilityAnnouncement(_message.Message):
    __slots__ = ("agent_id", "did", "capabilities", "timestamp", "ttl")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    did: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    timestamp: int
    ttl: int
    def __init__(self, agent_id: _Optional[str] = ..., did: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., timestamp: _Optional[int] = ..., ttl: _Optional[int] = ...) -> None: ...
