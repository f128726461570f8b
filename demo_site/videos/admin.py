from django.contrib import admin

from .models import Video


@admin.register(Video)
class VideoAdmin(admin.ModelAdmin):
    list_display = ("title", "duration_seconds", "published_at")
    search_fields = ("title", "description")
    prepopulated_fields = {"slug": ("title",)}
