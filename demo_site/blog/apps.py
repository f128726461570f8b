from django.apps import AppConfig


class BlogConfig(AppConfig):
    name = "demo_site.blog"
    label = "blog"
    default_auto_field = "django.db.models.BigAutoField"
