from django.urls import path

from . import views

app_name = "blog"
urlpatterns = [
    path("", views.post_list, name="list"),
    path("tag/<slug:slug>/", views.tag, name="tag"),
    path("<slug:slug>/", views.post_detail, name="post"),
]
