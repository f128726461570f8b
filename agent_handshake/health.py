"""Health checks for load balancers and orchestrators: can this node serve agents?

They are `django-health-check <https://github.com/codingjoe/django-health-check>`_ 4 checks (the ``health``
extra), served by its ``HealthCheckView`` with whatever other checks the site runs::

    path("health/", HealthCheckView.as_view(checks=agent_handshake.health.CHECKS))

Each raises ``ServiceUnavailable`` with a short message; the cause goes to the ``health_check`` logger, not
into the response.
"""

from __future__ import annotations

import dataclasses

from celery import current_app
from django.db import connections, router
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import DatabaseError

from .indexing import index_on_save_mode
from .models import EmbeddingIndex
from .retrieval.embeddings import EmbeddingUnavailable, get_embedding_backend
from .retrieval.index import EmbeddingModelChanged, current_index

try:
    from health_check.base import HealthCheck
    from health_check.checks import Database
    from health_check.exceptions import ServiceUnavailable
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ImportError(
        "agent_handshake.health needs django-health-check 4: pip install 'django-agent-handshake[health]'"
    ) from exc

__all__ = ["CHECKS", "Embeddings", "IndexingBroker", "Migrations", "VectorDatabase"]


@dataclasses.dataclass
class VectorDatabase(Database):
    """The database answers and has the ``vector`` extension installed (the passages' embeddings need it)."""

    def run(self) -> None:
        try:
            super().run()
        except ServiceUnavailable as exc:
            # Its message is the driver's first line, which can name the database's host.
            raise ServiceUnavailable("Could not connect to the database") from exc
        connection = connections[self.alias]
        try:
            with connection.temporary_connection() as cursor:
                cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                row = cursor.fetchone()
        except DatabaseError as exc:
            raise ServiceUnavailable("Could not read the database's extensions") from exc
        if row is None:
            raise ServiceUnavailable("The vector extension is not installed (run migrate)")


#: The aliases whose database had every migration of agent_handshake applied when a probe last looked.
_migrated_aliases: set[str] = set()


@dataclasses.dataclass
class Migrations(HealthCheck):
    """The database has every migration of agent_handshake (and those they depend on) applied.

    A node whose deployment's ``migrate`` failed would answer agents with 500s. Once a probe finds them all
    applied, this process does not look again: migrations only go forward under a running site, and building the
    migration graph on every probe would cost each one a read of every app's migration modules.
    """

    alias: str = "default"

    def run(self) -> None:
        if self.alias in _migrated_aliases:
            return
        connection = connections[self.alias]
        try:
            # On a connection of its own that it closes, as VectorDatabase does.
            with connection.temporary_connection():
                executor = MigrationExecutor(connection)
                targets = executor.loader.graph.leaf_nodes("agent_handshake")
                plan = executor.migration_plan(targets)
        except DatabaseError as exc:
            raise ServiceUnavailable("Could not read the applied migrations") from exc
        if plan:
            first, _ = plan[0]
            raise ServiceUnavailable(f"Migrations from {first.app_label}.{first.name} on are not applied (run migrate)")
        _migrated_aliases.add(self.alias)


@dataclasses.dataclass
class Embeddings(HealthCheck):
    """The configured embedding backend embeds a text: the model is loaded, or the embedding server answers.

    It calls the backend itself, not its cache, so an embedding server that went away is seen at once.
    """

    def run(self) -> None:
        try:
            backend = get_embedding_backend()
            vectors = backend.compute(["health check"])
        except (EmbeddingUnavailable, ImportError, OSError) as exc:
            raise ServiceUnavailable("The embedding backend cannot embed") from exc
        if vectors.shape[0] != 1 or not vectors.any():
            raise ServiceUnavailable("The embedding backend returned no vector")
        if vectors.shape[1] != backend.dimensions:
            raise ServiceUnavailable("The embedding backend returned vectors of another size")

        try:
            # On a connection of its own that it closes: the check runs in a thread of its own, and a connection
            # left open there would stay open after every probe.
            with connections[router.db_for_read(EmbeddingIndex)].temporary_connection():
                current_index(backend, create=False)
        except EmbeddingModelChanged as exc:  # every search would answer 503 until the passages are embedded again
            raise ServiceUnavailable("The passages hold another model's vectors (run agent_reindex --rebuild)") from exc
        except DatabaseError:
            pass  # VectorDatabase reports the database


@dataclasses.dataclass
class IndexingBroker(HealthCheck):
    """When saves queue their indexing to Celery (``INDEX_ON_SAVE``), its broker accepts a connection.

    Healthy without anything to check when indexing is not queued. It does not see whether a worker consumes
    the queue: add django-health-check's ``health_check.contrib.celery.Ping`` for that.
    """

    def run(self) -> None:
        if index_on_save_mode() != "celery":
            return
        seconds = self.timeout.total_seconds()
        try:
            with current_app.connection_for_write(connect_timeout=seconds) as connection:
                connection.ensure_connection(max_retries=1, timeout=seconds)
        except Exception as exc:  # kombu and each transport's client raise their own errors
            raise ServiceUnavailable("The Celery broker that indexing uses cannot be reached") from exc


#: Every check of this module, for ``HealthCheckView.as_view(checks=...)``.
CHECKS: tuple[type[HealthCheck], ...] = (VectorDatabase, Migrations, Embeddings, IndexingBroker)
