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
