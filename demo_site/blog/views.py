from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from .models import Post, Tag


def post_list(request):
    posts = Post.published.select_related("author").prefetch_related("tags")
    page = Paginator(posts, 10).get_page(request.GET.get("page"))
    return render(request, "blog/post_list.html", {"page": page, "tags": Tag.objects.all()})


def tag(request, slug):
    tag = get_object_or_404(Tag, slug=slug)
    posts = Post.published.filter(tags=tag).select_related("author")
    return render(request, "blog/post_list.html", {"page": Paginator(posts, 50).get_page(1), "tag": tag})


def post_detail(request, slug):
    post = get_object_or_404(Post.published.select_related("author").prefetch_related("tags"), slug=slug)
    return render(request, "blog/post_detail.html", {"post": post})
