"""``{% agent_manifest_link %}`` and ``{% agent_notice %}``: place the discovery markup yourself.

The middleware sees them in the page and does not add a second copy.
"""

from __future__ import annotations

from django import template
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from ..conf import app_settings
from ..middleware import notice_context

register = template.Library()


@register.simple_tag
def agent_manifest_link() -> SafeString:
    return mark_safe(
        render_to_string("agent_handshake/link.html", {"manifest_url": reverse("agent_handshake:manifest")})
    )


@register.simple_tag
def agent_notice() -> SafeString:
    return mark_safe(render_to_string(app_settings.NOTICE_TEMPLATE, notice_context()))
