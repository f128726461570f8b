"""``{% agent_manifest_link %}`` and ``{% agent_notice %}``: place the discovery markup yourself.

Each follows its markup with the marker the middleware looks for (``placed_marker``: an HMAC of
``SECRET_KEY``), so no second copy is added, also when the page or the fragment comes from a cache. Only these
tags (and the middleware itself) write it: what a page's content says never stops the middleware.
"""

from __future__ import annotations

from django import template
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from ..conf import app_settings
from ..middleware import notice_context, placed_marker

register = template.Library()


@register.simple_tag
def agent_manifest_link() -> SafeString:
    tag = render_to_string("agent_handshake/link.html", {"manifest_url": reverse("agent_handshake:manifest")})
    return mark_safe(tag.strip() + placed_marker("link"))


@register.simple_tag
def agent_notice() -> SafeString:
    notice = render_to_string(app_settings.NOTICE_TEMPLATE, notice_context())
    return mark_safe(notice.strip() + placed_marker("notice"))
