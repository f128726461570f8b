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

Each protocol endpoint (every ``POST`` above, the status URL and the schema templates) answers at its path with one
trailing slash too, as the same endpoint: ``POST /ask/`` is ``POST /ask``. An agent's client that adds a slash
would otherwise reach the site's own routes, included after these (a page route's HTML 404, or CSRF's HTML 403 on
a ``POST``), and a redirect would lose a ``POST``'s body with many clients and break a signed request's path.
The path is published once, without the slash (``reverse()``, the manifests, ``/openapi.json``). A site that wants
one of these slashed paths for a page of its own lists that route before the include. The documents
(``agent.json``, ``llms.txt``, ``openapi.json``, ``intentmanifest.yaml``...) are files and have no slashed form,
except the RFC 9728 metadata of ``/mcp``: a client at ``/mcp/`` is pointed at the metadata naming ``/mcp/``.

For the same reasons ``/capabilities`` and ``/agent/converse/status`` (a name or an id left out, slash or not)
answer AHP's JSON 404, saying where the resources are: they are no endpoints and are published nowhere.
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path
from django.urls.resolvers import RegexPattern, RoutePattern

from . import views
from .ahp.base import MissingNameView
from .ahp.capabilities import CapabilityView
from .ahp.converse import ConverseView
from .ahp.handshake import HandshakeVerifyView, HandshakeView
from .ahp.status import JobStatusView
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


class OptionalSlash:
    """A URL pattern that matches its path with one trailing slash too (see the module docstring); its regex, and so
    ``reverse()`` and the OpenAPI document, has no slash."""

    def match(self, path: str) -> Any:
        if path.endswith("/") and (found := super().match(path[:-1])) is not None:
            return found
        return super().match(path)


class OptionalSlashRoute(OptionalSlash, RoutePattern):
    pass


class OptionalSlashRegex(OptionalSlash, RegexPattern):
    pass


def door(route: str, view: Any, name: str) -> URLPattern:
    """``path(route, view, name=name)``, answering ``route + "/"`` too."""
    return URLPattern(OptionalSlashRoute(route, name=name, is_endpoint=True), view, name=name)


def re_door(regex: str, view: Any, name: str) -> URLPattern:
    """``re_path(regex, view, name=name)``, answering its path with one trailing slash too (an id or a name then
    does not end with that slash)."""
    return URLPattern(OptionalSlashRegex(regex, name=name, is_endpoint=True), view, name=name)


urlpatterns = [
    path(".well-known/agent.json", views.ManifestView.as_view(), name="manifest"),
    path("llms.txt", views.LlmsTxtView.as_view(), name="llms_txt"),
    path("llms-full.txt", views.LlmsFullTxtView.as_view(), name="llms_full_txt"),
    path("robots.txt", views.RobotsTxtView.as_view(), name="robots_txt"),
    door("agent/converse", ConverseView.as_view(), name="converse"),
    re_door(rf"^agent/converse/status/(?P<session_id>{ANYTHING})$", JobStatusView.as_view(), name="converse_status"),
    door("agent/converse/status", MissingNameView.as_view(missing="session"), name="converse_status_missing"),
    door("agent/handshake", HandshakeView.as_view(), name="handshake"),
    door("agent/handshake/verify", HandshakeVerifyView.as_view(), name="handshake_verify"),
    door("agent/asp", AgentSemanticProtocolView.as_view(), name="asp"),
    re_door(rf"^capabilities/(?P<name>{ANYTHING})$", CapabilityView.as_view(), name="capability"),
    door("capabilities", MissingNameView.as_view(missing="capability"), name="capability_missing"),
    door("ask", AskView.as_view(), name="nlweb_ask"),
    door("await", AwaitView.as_view(), name="nlweb_await"),
    door("mcp", MCPView.as_view(), name="mcp"),
    path("intentmanifest.yaml", views.IntentManifestView.as_view(), name="intent_manifest"),
    door("intent", IntentView.as_view(), name="intent"),
    path("intent-ui/", IntentPageView.as_view(), name="intent_ui"),
    path("intent-ui/message", IntentPageMessageView.as_view(), name="intent_ui_message"),
    door("schema-templates", SchemaTemplatesView.as_view(), name="schema_templates"),
    re_door(rf"^schema-templates/(?P<scenario>{ANYTHING})$", SchemaTemplateView.as_view(), name="schema_template"),
    path("openapi.json", OpenAPIView.as_view(), name="openapi"),
    path("agent/api-docs/", APIDocsView.as_view(), name="api_docs"),
    path("agent/api-docs/<str:name>", APIDocsAssetView.as_view(), name="api_docs_asset"),
    # /mcp/ is /mcp too: its challenge points at the metadata of the URL the client used (RFC 9728 §3.3).
    door(".well-known/oauth-protected-resource/mcp", ProtectedResourceMetadataView.as_view(), "mcp_resource_metadata"),
]
