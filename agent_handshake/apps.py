from django.apps import AppConfig
from django.db.models.signals import pre_delete
from django.utils.module_loading import autodiscover_modules

from .conf import app_settings


class AgentHandshakeConfig(AppConfig):
    name = "agent_handshake"
    verbose_name = "Agent Handshake"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Not at import: Django imports this module while it populates the app registry, before the models, and
        # each of these modules imports models (directly or through others).
        from . import (
            checks,  # noqa: F401  (registers the system checks)
            tasks,  # noqa: F401  (its tasks, which the concierge and the signal handlers queue by name)
        )
        from .ahp.render import status_body
        from .concierge.capabilities import register_builtin_capabilities
        from .concierge.job_callbacks import register_callback_renderer
        from .concierge.job_owners import withdraw_deleted_keys_jobs
        from .concierge.template_publishing import connect as connect_schema_templates
        from .intentweb.views import callback_body as intent_callback
        from .models import ApiKey
        from .schema_templates.views import callback_body as schema_templates_callback
        from .signal_handlers import connect

        autodiscover_modules(app_settings.AUTODISCOVER_MODULE)
        register_builtin_capabilities()  # each unless a site's capability took its name (it records its own)
        register_callback_renderer("ahp", status_body)  # async jobs' callbacks are AHP's (§9.1)
        register_callback_renderer("intentweb", intent_callback)  # ... or IntentWeb's envelope
        register_callback_renderer("schema_templates", schema_templates_callback)  # ... or the job and its output
        connect()
        connect_schema_templates()
        pre_delete.connect(withdraw_deleted_keys_jobs, sender=ApiKey, dispatch_uid="agent_handshake.deleted_keys_jobs")
