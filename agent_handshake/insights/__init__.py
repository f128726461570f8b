"""Agent traffic insights: what every front door records about agent requests, the daily aggregates, the
content gaps, and the admin pages that show them to the site's owners."""
