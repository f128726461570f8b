"""``manage.py agent_site_key``: the site's identity (DID and Ed25519 public key) and where its private key lives.

Run it once at deployment to create the key file before several workers start, to find the file to back up (a
lost key means a new DID, and agents that pinned the old one stop trusting the site), or to get the public key
an agent's operator asks for. The private key itself is never printed.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from agent_handshake.identity.site_key import load_site_key, rotate_site_key, site_did, site_public_key


class Command(BaseCommand):
    help = "Show the site's DID and Ed25519 public key, and where its private key is (creating the key file if needed)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Replace the key file's key with a new one (the old file is kept beside it); the manifests announce "
            "the old DID as rotated. Restart every process afterwards.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rotate"]:
            try:
                old, new, kept = rotate_site_key()
            except ImproperlyConfigured as error:
                raise CommandError(str(error)) from error
            self.stdout.write(self.style.SUCCESS(f"Rotated: {old} -> {new}"))
            self.stdout.write(
                f"The old key file is kept at {kept}; restart every process so all sign with the new key."
            )
            return
        try:
            loaded = load_site_key()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from error
        # load_site_key() has just refreshed the cache these read from.
        self.stdout.write(f"DID: {site_did()}")
        self.stdout.write(f"Public key (Ed25519, base64url): {site_public_key()}")
        if loaded.created:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Private key: {loaded.location} (created now; back it up, keep it out of the repository)"
                )
            )
        else:
            self.stdout.write(f"Private key: {loaded.location}")
