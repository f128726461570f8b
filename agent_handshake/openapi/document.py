"""Generating ``/openapi.json`` with drf-spectacular, with our settings whatever the site's are.

The generator reads the site's URL configuration (so the paths are where the site mounted the app), keeps the
app's own views, and replaces ``/capabilities/{name}`` with one ``POST /capabilities/<name>`` per capability the
manifest lists, each described by :class:`~agent_handshake.ahp.openapi.CapabilityOperation`. ``info`` comes from
the site profile and ``servers[0]`` from the request (:mod:`.views` keeps a built document per content state and
base URL, as the manifest is kept).

Our views set ``schema = None``, which DRF's and drf-spectacular's generators read as "leave this view out": a
site that generates its own schema does not get our operations without their components (or DRF's own inspector
choking on drf-spectacular's). :class:`Generator` enumerates our views regardless and documents each with its
``openapi_inspector``.

drf-spectacular's settings are one global object; :func:`build` patches it with :func:`settings_for` for the
length of one generation and restores it after, which is what drf-spectacular's own ``SpectacularAPIView`` does
with ``custom_settings``. Our builds are serialised by a lock and happen once per content state and base URL; a
schema the site generates in that same instant, in another thread, would see our settings.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from django.urls import get_script_prefix
from drf_spectacular.generators import EndpointEnumerator, SchemaGenerator
from drf_spectacular.settings import spectacular_settings

from .. import state
from ..ahp import handshake as ahp_handshake
from ..ahp import openapi as ahp_openapi
from ..ahp.capabilities import CapabilityView
from ..concierge.turns import answering_capabilities
from ..intentweb import openapi as intentweb_openapi
from ..mcp import openapi as mcp_openapi
from ..nlweb import openapi as nlweb_openapi
from ..registry import AHP_VERSION, OPENAPI_VERSION
from ..schema_templates import openapi as schema_templates_openapi
from ..views import RobotsTxtView
from . import extensions  # noqa: F401 - registers the security schemes

_lock = threading.Lock()
COMPONENTS = {
    **ahp_openapi.COMPONENTS,
    **ahp_handshake.COMPONENTS,
    **nlweb_openapi.COMPONENTS,
    **mcp_openapi.COMPONENTS,
    **intentweb_openapi.COMPONENTS,
    **schema_templates_openapi.COMPONENTS,
}
#: Our views that are not protocol endpoints (the document itself, its browsable reference).
UNDOCUMENTED = ("agent_handshake.openapi.",)


def ours(callback: Any) -> bool:
    """Whether a URL pattern's view is one of the app's documented protocol endpoints."""
    module = getattr(getattr(callback, "cls", None), "__module__", "")
    return module.startswith("agent_handshake.") and not module.startswith(UNDOCUMENTED)


class Endpoints(EndpointEnumerator):
    """The app's API views, although they set ``schema = None`` (see the module docstring)."""

    def should_include_endpoint(self, path: str, callback: Any) -> bool:
        return ours(callback) and getattr(callback.cls, "openapi_inspector", None) is not None


@functools.cache
def documented(view_class: type) -> type:
    """``view_class`` with its OpenAPI inspector as its schema, for :class:`Generator` only."""
    attributes = {"schema": view_class.openapi_inspector(), "__module__": view_class.__module__}
    return type(view_class.__name__, (view_class,), {**attributes, "__qualname__": view_class.__qualname__})


class Generator(SchemaGenerator):
    endpoint_inspector_cls = Endpoints

    def create_view(self, callback: Any, method: str, request: Any = None) -> Any:
        if callback.cls.schema is None:
            callback = documented(callback.cls).as_view(**getattr(callback, "initkwargs", {}))
        return super().create_view(callback, method, request)


def our_endpoints(endpoints: list[tuple[str, str, str, Any]]) -> list[tuple[str, str, str, Any]]:
    """A drf-spectacular preprocessing hook: the app's endpoints, with one operation per capability."""
    kept = []
    for path, path_regex, method, callback in endpoints:
        if not ours(callback) or method == "OPTIONS":
            continue
        if callback.cls is RobotsTxtView and not RobotsTxtView().enabled():
            continue
        if callback.cls is CapabilityView:
            for capability in answering_capabilities():
                concrete = path.replace("{name}", capability.name)
                view = CapabilityView.as_view(documented_capability=capability)
                kept.append((concrete, "^" + re.escape(concrete.lstrip("/")) + "$", method, view))
            continue
        kept.append((path, path_regex, method, callback))
    return kept


def settings_for(snapshot: state.Snapshot) -> dict[str, Any]:
    return {
        "OAS_VERSION": OPENAPI_VERSION,
        "TITLE": snapshot.name or "Agent endpoints",
        "DESCRIPTION": (
            (snapshot.description + "\n\n" if snapshot.description else "")
            + "This site's agent endpoints: AHP (the manifest at /.well-known/agent.json), one operation per "
            "capability (AHP Appendix E), NLWeb, and MCP. Every page of registered content has a markdown "
            "version at its URL with `.md` appended (or with `Accept: text/markdown`)."
        ),
        "VERSION": AHP_VERSION,
        "PREPROCESSING_HOOKS": [f"{__name__}.our_endpoints"],
        "POSTPROCESSING_HOOKS": [],
        "SCHEMA_PATH_PREFIX": "",
        "SECURITY": [],
        # The header credentials are the schemes; a key in the body (AHP's auth, MCP's _meta.auth) is the same key.
        "AUTHENTICATION_WHITELIST": ["agent_handshake.identity.authentication.AgentKeyAuthentication"],
        "COMPONENT_SPLIT_REQUEST": False,
        "SORT_OPERATIONS": False,
        "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
        "APPEND_COMPONENTS": {"schemas": COMPONENTS},
        "SERVERS": [],
        "EXTERNAL_DOCS": {},
        "TAGS": [],
        "CONTACT": {},
        "LICENSE": {},
    }


def build(base: str) -> dict[str, Any]:
    """The document for a site served at ``base`` ("https://example.com") under the current script prefix."""
    snapshot = state.snapshot()
    with _lock:  # drf-spectacular's settings are global (see the module docstring): one document at a time
        try:
            spectacular_settings.apply_patches(settings_for(snapshot))
            document = Generator().get_schema(request=None, public=True)
        finally:
            spectacular_settings.clear_patches()
    # The paths are the URL patterns'; a site served under a path (SCRIPT_NAME "/shop") has them there, as the
    # manifest's reversed URLs say, so the server URL carries that prefix.
    document["servers"] = [{"url": base + get_script_prefix().rstrip("/")}]
    return document
