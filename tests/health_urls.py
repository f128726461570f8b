"""The test URLconf plus the health endpoint, wired as the README says."""

from django.urls import path
from health_check.views import HealthCheckView

import agent_handshake.health
from tests.urls import urlpatterns as site_urlpatterns

urlpatterns = [
    path("health/", HealthCheckView.as_view(checks=agent_handshake.health.CHECKS)),
    *site_urlpatterns,  # ends with the pages' catch-all
]
