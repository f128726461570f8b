from django.contrib import admin
from django.urls import include, path

from . import views

handler404 = "demo_site.views.page_not_found"
handler500 = "demo_site.views.server_error"

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("agent_handshake.urls")),
    path("admin/", admin.site.urls),
    path("blog/", include("demo_site.blog.urls")),
    path("videos/", include("demo_site.videos.urls")),
    path("shop/", include("demo_site.shop.urls")),
    path("", include("demo_site.pages.urls")),
]
