"""The site's signing key (E013): one given in ``SITE_PRIVATE_KEY``, or found at ``SITE_KEY_FILE``, must load.

The key signs the site's IntentWeb attribution entries and its public key is published in the manifests, so a
broken one fails them at their first use. Nothing is created here: a missing key file is created at first use, not
by a check. A message never repeats the key.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Tags, register

from ..identity.site_key import configuration_problem


@register(Tags.security)
def check_site_key(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The site's signing key, when one is configured or on disk, must load (nothing is created here)."""
    problem = configuration_problem()
    if problem is None:
        return []
    hint = "Fix or remove it; python manage.py agent_site_key creates a new key file when there is none."
    return [Error(problem, hint=hint, id="agent_handshake.E013")]
