from django.shortcuts import render

from .blog.models import Post
from .shop.models import Product
from .videos.models import Video


def home(request):
    context = {
        "posts": Post.published.select_related("author")[:5],
        "videos": Video.objects.all()[:3],
        "products": Product.objects.filter(is_active=True).order_by("-updated_at")[:4],
    }
    return render(request, "home.html", context)


def page_not_found(request, exception):
    return render(request, "404.html", status=404)


def server_error(request):
    return render(request, "500.html", status=500)
