from django.apps import AppConfig


class PagesConfig(AppConfig):
    name = "demo_site.pages"
    label = "pages"
    default_auto_field = "django.db.models.BigAutoField"
