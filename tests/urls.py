from django.contrib import admin
from django.urls import include, path

from tests.testapp import views

urlpatterns = [
    path("", include("agent_handshake.urls")),
    path("admin/", admin.site.urls),
    path("page/", views.html_page),
    path("big/", views.big_page),
    path("articles/<slug:slug>/", views.article),
    path("stream/", views.streaming_page),
    path("astream/", views.async_streaming_page),
    path("json/", views.json_view),
    path("gzipped/", views.pre_gzipped),
    path("brotli/", views.brotli_page),
    path("exempt/", views.exempt_page),
    path("aexempt/", views.async_exempt_page),
    path("tagged/", views.tagged_page),
    path("cached-tagged/", views.cached_tagged_page),
    path("cached-fragments/", views.cached_fragments_page),
    path("fragment/", views.fragment),
    path("nobody/", views.no_body_tag),
    path("broken/", views.broken),
    path("blog/", include("demo_site.blog.urls")),
    path("videos/", include("demo_site.videos.urls")),
    path("shop/", include("demo_site.shop.urls")),
    path("", include("demo_site.pages.urls")),
]
