"""Agent Semantic Protocol v0.1 over HTTP: ``POST /agent/asp`` takes one framed protobuf message and answers one.

Framing (§4, :mod:`.framing`): ``Length`` (uint32 big-endian, ``1 + len(payload)``), a type byte (``0x01``
Handshake, ``0x02`` Intent, ``0x03`` Negotiation, ``0x04`` Workflow, ``0x05`` Capability), the protobuf payload.
A body is exactly one frame, ``Content-Type: application/x-protobuf``, at most ``MAX_REQUEST_BYTES``.

Messages (``proto/asp.proto``: upstream's ``symplex.proto``, package ``symplex.v1``, every upstream field number
kept):

- ``0x01`` HandshakeMessage, first (no ``challenge_response``): the agent's ``did``, ``public_key``, a 32-byte
  ``challenge``, ``timestamp`` (Unix ns). The site answers a HandshakeMessage with its ``did``, ``public_key``,
  ``challenge``, ``challenge_response`` (its signature of the agent's challenge), ``version``, ``timestamp``,
  ``agent_id`` (the site's base URL) and ``capabilities``. The signed bytes are the mutual, domain-separated ones of
  :func:`agent_handshake.identity.did.challenge_payload`.
- ``0x01`` HandshakeMessage, second: ``did``, ``challenge`` echoing the site's challenge, ``challenge_response``
  the agent's signature of it (role ``initiator``). The site answers a HandshakeMessage carrying
  ``access_token`` (field 100) and ``expires_in`` (101): a session credential every front door accepts as
  ``Authorization: Bearer``.
- ``0x02`` IntentMessage from a verified agent (its DID completed a handshake), signed (field 9, see
  :mod:`.signing`) and fresh (``timestamp`` within ``SIGNATURE_MAX_SKEW``). A signed intent is answered once: a
  replay of one already answered (``accepted`` or not) is refused, while one refused before it was answered (429,
  503, 403, 400) leaves its signature unspent and may be sent again unchanged (after ``Retry-After``). The
  ``payload`` text (at most 4096 characters, as AHP's ``query`` and NLWeb's ``query.text``) is routed among the
  site's capabilities (by ``intent_vector`` when it has the site embedding model's dimensions, else by the
  payload's embedding; ``capabilities`` narrows the choice) and a question capability (``content_search``...)
  answers it: a ``0x03`` NegotiationResponse with ``accepted=true``, the answer in ``reason``, the capability in
  ``workflow_steps``, signed by the site (field 10) with the key published in ``/.well-known/agent.json``. An
  action capability, or no clear route: ``accepted=false`` and a ``reason`` pointing to the JSON endpoints.
  ``trust_delta`` is the change the request made to the agent's trust here.

Extension fields (documented in ``proto/asp.proto``): ``IntentMessage.signature = 9`` and
``NegotiationResponse.signature = 10`` (upstream's Go code sends them; its .proto lacks them), and for this HTTP
binding only ``HandshakeMessage.access_token = 100``, ``HandshakeMessage.expires_in = 101``.

Errors are never frames (a malformed frame has no type to answer in): AHP §10 JSON, ``{"status": "error", "code",
"message"}``, with 400 (``frame_too_short``, ``frame_length_mismatch``, ``unknown_message_type``,
``invalid_payload``, ``unsupported_message_type``, ``invalid_request``), 401 (``signature_required``,
``signature_invalid``, ``unverified_did``, ``stale_timestamp``, ``replayed`` and the handshake's codes), 403
``blocked`` (or ``forbidden``: a question capability with a scope the agent's tier and own scopes lack, as on AHP),
413 ``request_too_large``, 415 ``unsupported_media_type``, 429 or 503 ``unavailable``. What POST /agent/handshake
refuses (an ``agent_id`` over 200 characters, over 50 ``capabilities`` or a name over 100) is refused here as there
(400 ``invalid_request`` naming the field), never cut; an intent's ``capabilities`` take the same limits. So is an
intent's ``id`` over 128 characters (echoed as ``request_id``; AHP's ``session_id`` takes as many) or an
``intent_vector`` of over 8192 numbers (AHP's ``context.intent_vector``), before the intent is answered.

Interoperability vectors: ``vectors.json`` (:mod:`.vectors`). The generated module ``asp_pb2.py`` is committed;
regenerate it (grpcio-tools) with ``make proto``::

    python -m grpc_tools.protoc -I agent_handshake/asp/proto --python_out=agent_handshake/asp \\
        --pyi_out=agent_handshake/asp agent_handshake/asp/proto/asp.proto
"""
