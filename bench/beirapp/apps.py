from django.apps import AppConfig


class BeirAppConfig(AppConfig):
    name = "bench.beirapp"
    label = "beirapp"
    default_auto_field = "django.db.models.BigAutoField"
