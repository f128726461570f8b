"""``{% agent_manifest_link %}`` and ``{% agent_notice %}``: place the discovery markup yourself.

Each tells the middleware that it rendered (for the current request), so no second copy is added. Only these
tags can: what a page's content says never stops the middleware from adding the markup.
"""

from __future__ import annotations

from django import template
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from ..conf import app_settings
from ..middleware import mark_placed, notice_context

register = template.Library()


@register.simple_tag
def agent_manifest_link() -> SafeString:
    mark_placed("link")
    return mark_safe(
        render_to_string("agent_handshake/link.html", {"manifest_url": reverse("agent_handshake:manifest")})
    )


@register.simple_tag
def agent_notice() -> SafeString:
    mark_placed("notice")
    return mark_safe(render_to_string(app_settings.NOTICE_TEMPLATE, notice_context()))
