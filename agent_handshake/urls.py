"""The app's URLs. Include them at the root of the site: ``path("", include("agent_handshake.urls"))``.

Every path the app serves, in one place:

======================================  =========================================================
``/.well-known/agent.json``             the AHP manifest (``agent_handshake:manifest``)
``/llms.txt``                           the llms.txt index (``agent_handshake:llms_txt``)
``/llms-full.txt``                      every registered object's markdown (``agent_handshake:llms_full_txt``)
``/robots.txt``                         robots.txt with content signals, if ``SERVE_ROBOTS_TXT``
``<object url>.md``                     an object's markdown version (served by the middleware)
``POST /agent/converse``                AHP MODE2/MODE3 questions and capabilities (``agent_handshake:converse``)
``GET /agent/converse/status/<id>``     an async job's status (``agent_handshake:converse_status``)
``POST /agent/handshake``               a verified agent's DID handshake, begun (``agent_handshake:handshake``)
``POST /agent/handshake/verify``        ... and finished: a session credential (``agent_handshake:handshake_verify``)
``POST /agent/asp``                     Agent Semantic Protocol, framed protobuf (``agent_handshake:asp``)
``POST /capabilities/<name>``           one capability, AHP Appendix E (``agent_handshake:capability``)
``POST /ask``                           NLWeb v0.54 questions and capabilities (``agent_handshake:nlweb_ask``)
``POST /await``                         NLWeb: check in on, or cancel, a Promise (``agent_handshake:nlweb_await``)
``GET /openapi.json``                   OpenAPI 3.1 of every endpoint above (``agent_handshake:openapi``)
``GET /agent/api-docs/``                Swagger UI over it, when ``API_DOCS`` (or ``DEBUG``) (``...:api_docs``)
``POST /mcp``                           MCP, stateless Streamable HTTP (``agent_handshake:mcp``)
``GET /intentmanifest.yaml``            the IntentWeb manifest (``agent_handshake:intent_manifest``)
``POST /intent``                        IntentWeb intents, its ``intent_endpoint`` (``agent_handshake:intent``)
``GET /intent-ui/``                     the same intents for people (``agent_handshake:intent_ui``)
``GET|POST /schema-templates``          schema templates: the scenarios, get_schema_template and structured
                                        submissions (``agent_handshake:schema_templates``)
``GET /schema-templates/<scenario>``    one scenario's template (``agent_handshake:schema_template``)
``/.well-known/oauth-protected-resource/mcp``
                                        how to authenticate at /mcp, RFC 9728 (``...:mcp_resource_metadata``)
======================================  =========================================================
"""

from django.urls import path, re_path

from . import views
from .ahp.capabilities import CapabilityView
from .ahp.converse import ConverseView
from .ahp.handshake import HandshakeVerifyView, HandshakeView
from .ahp.invoke import JobStatusView
from .asp.views import AgentSemanticProtocolView
from .intentweb.page import IntentPageMessageView, IntentPageView
from .intentweb.views import IntentView
from .mcp.views import MCPView, ProtectedResourceMetadataView
from .nlweb.views import AskView, AwaitView
from .openapi.views import APIDocsAssetView, APIDocsView, OpenAPIView
from .schema_templates.views import SchemaTemplatesView, SchemaTemplateView

app_name = "agent_handshake"
#: An id or a name in a URL, whatever it holds (a slash, a line break): the view answers for it in its protocol's
#: JSON, not the site's HTML 404 (``<str:>`` stops at "/", ``<path:>`` at a line break).
ANYTHING = r"[\s\S]+"

urlpatterns = [
    path(".well-known/agent.json", views.ManifestView.as_view(), name="manifest"),
    path("llms.txt", views.LlmsTxtView.as_view(), name="llms_txt"),
    path("llms-full.txt", views.LlmsFullTxtView.as_view(), name="llms_full_txt"),
    path("robots.txt", views.RobotsTxtView.as_view(), name="robots_txt"),
    path("agent/converse", ConverseView.as_view(), name="converse"),
    re_path(rf"^agent/converse/status/(?P<session_id>{ANYTHING})$", JobStatusView.as_view(), name="converse_status"),
    path("agent/handshake", HandshakeView.as_view(), name="handshake"),
    path("agent/handshake/verify", HandshakeVerifyView.as_view(), name="handshake_verify"),
    path("agent/asp", AgentSemanticProtocolView.as_view(), name="asp"),
    re_path(rf"^capabilities/(?P<name>{ANYTHING})$", CapabilityView.as_view(), name="capability"),
    path("ask", AskView.as_view(), name="nlweb_ask"),
    path("await", AwaitView.as_view(), name="nlweb_await"),
    path("mcp", MCPView.as_view(), name="mcp"),
    path("intentmanifest.yaml", views.IntentManifestView.as_view(), name="intent_manifest"),
    path("intent", IntentView.as_view(), name="intent"),
    path("intent-ui/", IntentPageView.as_view(), name="intent_ui"),
    path("intent-ui/message", IntentPageMessageView.as_view(), name="intent_ui_message"),
    path("schema-templates", SchemaTemplatesView.as_view(), name="schema_templates"),
    re_path(rf"^schema-templates/(?P<scenario>{ANYTHING})$", SchemaTemplateView.as_view(), name="schema_template"),
    path("openapi.json", OpenAPIView.as_view(), name="openapi"),
    path("agent/api-docs/", APIDocsView.as_view(), name="api_docs"),
    path("agent/api-docs/<str:name>", APIDocsAssetView.as_view(), name="api_docs_asset"),
    path(
        ".well-known/oauth-protected-resource/mcp",
        ProtectedResourceMetadataView.as_view(),
        name="mcp_resource_metadata",
    ),
]
