"""The demo site's URLs (what `make demo` serves), plus the benchmarks' /constant/ that LiveServer waits for."""

from django.urls import path

from bench.urls import constant
from demo_site.urls import handler404, handler500  # noqa: F401  (the demo's error pages)
from demo_site.urls import urlpatterns as demo_urlpatterns

urlpatterns = [path("constant/", constant), *demo_urlpatterns]
