from django.http import HttpResponse
from django.urls import path

from tests.urls import urlpatterns as test_urlpatterns

CONSTANT = b"x" * 1024


def constant(request):
    """The baseline: the cheapest useful Django view."""
    return HttpResponse(CONSTANT, content_type="text/plain")


urlpatterns = [path("constant/", constant), *test_urlpatterns]
