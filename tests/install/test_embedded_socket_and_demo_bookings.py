"""What a site admin runs: the embedded server, the demo's capabilities and the management commands, at their edges."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_handshake.embedded import start_server


def test_a_data_directory_too_deep_for_its_socket_is_refused(tmp_path):
    """The embedded server trusts every connection on its socket (initdb --auth=trust): only the data directory
    (0700) keeps other users of the machine out. With a path too long for a Unix socket, pgserver would put the
    socket in a world-reachable directory of the temp dir instead, where any local user is the superuser."""
    deep = tmp_path / ("d" * 110) / ".pgdata"
    with pytest.raises(RuntimeError, match="AGENT_HANDSHAKE_PGDATA"):
        start_server(deep)
    assert not deep.exists()  # refused before anything was created or started


def test_the_embedded_socket_is_only_reachable_through_the_data_directory():
    from django.db import connection

    socket_dir = Path(connection.settings_dict["HOST"])
    assert (socket_dir / "PG_VERSION").exists()  # the data directory itself, not a directory of the temp dir
    assert stat.S_IMODE(os.stat(socket_dir).st_mode) & 0o077 == 0


# --- the demo's book_appointment -----------------------------------------------------------------------------------


@pytest.fixture
def shop(db):
    from django.core.management import call_command

    call_command("loaddata", "demo", app_label="shop", verbosity=0)


def book(client, service, at, secret, day=None):
    from tests.ahp.test_mode3 import bearer, booking, converse, next_open_day

    body = booking(day or next_open_day()[0], at, service=service)
    return converse(client, body, **bearer(secret))


@pytest.mark.django_db
def test_a_booking_must_end_by_closing_time(client, shop):
    """The shop takes bookings 10:00 to 17:00: a 45-minute tasting at 16:30 would run until 17:15."""
    from tests.ahp.test_mode3 import issue

    _, secret = issue()
    late = book(client, "tea-tasting", "16:30", secret)
    assert late.status_code == 400, late.json()
    assert late.json()["fields"] == ["input.time"]
    assert book(client, "tea-tasting", "16:00", secret).status_code == 200  # ends at 16:45
    assert book(client, "teaware-consultation", "16:30", secret).status_code == 200  # 30 minutes: ends at 17:00


@pytest.mark.django_db
def test_a_tasting_is_not_booked_over_another(client, shop):
    """A tasting takes 45 minutes: the 10:30 slot is taken while the 10:00 tasting runs (a double booking)."""
    from tests.ahp.test_mode3 import issue

    _, secret = issue()
    assert book(client, "tea-tasting", "10:00", secret).status_code == 200
    overlapping = book(client, "tea-tasting", "10:30", secret)
    assert overlapping.status_code == 409, overlapping.json()
    assert book(client, "tea-tasting", "11:00", secret).status_code == 200  # 10:45 is free again
    assert book(client, "teaware-consultation", "10:30", secret).status_code == 200  # another service
