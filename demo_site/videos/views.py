from django.shortcuts import get_object_or_404, render

from .models import Video


def video_list(request):
    return render(request, "videos/video_list.html", {"videos": Video.objects.all()})


def video_detail(request, slug):
    return render(request, "videos/video_detail.html", {"video": get_object_or_404(Video, slug=slug)})
