from django.apps import AppConfig


class VideosConfig(AppConfig):
    name = "demo_site.videos"
    label = "videos"
    default_auto_field = "django.db.models.BigAutoField"
