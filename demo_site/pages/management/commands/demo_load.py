from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agent_handshake.models import SiteProfile
from demo_site.pages.demo_key import demo_secret


class Command(BaseCommand):
    help = "Load the demo content (idempotent), the agent site profile and, with DEBUG on, an admin/admin login."

    def handle(self, *args, **options):
        call_command("loaddata", "demo", verbosity=options["verbosity"], stdout=self.stdout)
        # Requests that teach the router which capability is meant (the admin's "Routing examples"): the phrasings
        # of bench/data/routing.json and routing_heldout3.json. Loaded again, they replace themselves (natural key).
        call_command("loaddata", "demo_routing_examples", verbosity=options["verbosity"], stdout=self.stdout)
        if not SiteProfile.objects.exists():
            SiteProfile.objects.create(
                name="Lantern & Kettle",
                description="An independent tea shop and tea blog in Portland, Oregon: brewing guides, videos, "
                "loose-leaf teas and teaware.",
                contact_email="hello@lanternkettle.example",
                contact_url="/contact/",
                contact_phone="+1 503 555 0142",
                postal_address="1187 SE Division St, Portland, OR 97202, USA",
                ai_train=False,
                ai_input=True,
                search=True,
                attribution_required=True,
            )
            self.stdout.write("Created the agent site profile.")
        if settings.DEBUG:
            User = get_user_model()
            if not User.objects.filter(username="admin").exists():
                User.objects.create_superuser("admin", "admin@lanternkettle.example", "admin")
                self.stdout.write("Created the demo superuser admin / admin (DEBUG only).")
            demo_secret()
