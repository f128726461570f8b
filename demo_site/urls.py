from django.contrib import admin
from django.urls import include, path
from health_check.views import HealthCheckView

import agent_handshake.health

from . import views

handler404 = "demo_site.views.page_not_found"
handler500 = "demo_site.views.server_error"

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("agent_handshake.urls")),
    path("admin/", admin.site.urls),
    # The README's health endpoint: the checks that say whether this node can serve agents.
    path("health/", HealthCheckView.as_view(checks=agent_handshake.health.CHECKS)),
    path("blog/", include("demo_site.blog.urls")),
    path("videos/", include("demo_site.videos.urls")),
    path("shop/", include("demo_site.shop.urls")),
    path("", include("demo_site.pages.urls")),
]
