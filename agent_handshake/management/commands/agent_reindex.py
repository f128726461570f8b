from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...indexing import configs_for, documents_of, index_passages, reindex_model, remove_unregistered
from ...registry import NotRegistered
from ...retrieval.embeddings import EmbeddingUnavailable
from ...retrieval.index import EmbeddingModelChanged, refresh_lexeme_stats, reset_index, reset_passages

#: The largest --batch-size: PostgreSQL refuses a cursor FETCH of 2**31 rows or more, and a batch is held in memory.
MAX_BATCH_SIZE = 100_000


class Command(BaseCommand):
    help = (
        "Bring the agent documents of registered models up to date. Unchanged objects are skipped, so an "
        "interrupted run resumes where it stopped. Without --model, the documents of models no longer registered "
        "are removed too. An object that cannot be indexed is named and skipped; the run goes on, then exits with "
        "an error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            action="append",
            dest="models",
            metavar="APP_LABEL.MODEL",
            help="Only this registered model (repeatable). Default: all of them.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=500,
            help=f"Objects read per database round trip (1 to {MAX_BATCH_SIZE}, default 500).",
        )
        parser.add_argument(
            "--rebuild",
            action="store_true",
            help=(
                "Embed the documents again: every model's (needed after changing the embedding model), or only "
                "those named with --model. Each document's passages are replaced as it is embedded, so searches "
                "keep answering meanwhile; after a change of embedding model every passage is dropped first."
            ),
        )
        parser.add_argument(
            "--no-passages", action="store_true", help="Only the documents (MODE1), not the passages (MODE2)."
        )

    def handle(self, *args: Any, models: list[str] | None = None, batch_size: int = 500, **options: Any) -> None:
        if not 1 <= batch_size <= MAX_BATCH_SIZE:  # before --rebuild drops anything
            raise CommandError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}.")
        try:
            configs = configs_for(models)
        except NotRegistered as exc:
            raise CommandError(str(exc)) from exc
        if not configs:
            # Still remove the documents of the models that were (below): nothing else would.
            self.stdout.write("No models are registered with agent_handshake.")
        if options["rebuild"] and models:
            try:
                reset_passages(documents_of(configs))
            except EmbeddingModelChanged as exc:
                raise CommandError(
                    f"{exc} A different embedding model needs every model rebuilt: leave out --model."
                ) from exc
            except EmbeddingUnavailable as exc:
                raise CommandError(f"{exc} Nothing was changed; run the rebuild again once it answers.") from exc
            labels = ", ".join(config.label for config in configs)
            self.stdout.write(
                f"Embedding the documents of {labels} again; searches answer from their current passages meanwhile."
            )
        elif options["rebuild"]:
            try:
                dropped = reset_index()
            except EmbeddingUnavailable as exc:
                raise CommandError(f"{exc} Nothing was dropped; run the rebuild again once it answers.") from exc
            if dropped:
                self.stdout.write("Dropped every passage and the embedding index; embedding all documents again.")
            else:
                self.stdout.write(
                    "Embedding all documents again; searches answer from their current passages meanwhile."
                )
        verbose = options["verbosity"] >= 1
        failures: list[str] = []
        for config in configs:
            started = time.monotonic()

            def failed(object_id: str, exc: Exception, label: str = config.label) -> None:
                failures.append(f"{label} {object_id} ({type(exc).__name__}: {exc})")
                self.stderr.write(f"Could not index {failures[-1]}")

            counts = reindex_model(
                config,
                batch_size=batch_size,
                progress=self._progress_bar(config.label) if verbose else None,
                failed=failed,
            )
            summary = ", ".join(f"{count} {state}" for state, count in counts.items() if count or state != "failed")
            if not options["no_passages"]:
                try:
                    embedded = index_passages(
                        config, progress=self._progress_bar(f"{config.label} passages") if verbose else None
                    )
                except (EmbeddingModelChanged, EmbeddingUnavailable) as exc:
                    raise CommandError(str(exc)) from exc
                summary += f"; {embedded} embedded"
            self.stdout.write(self.style.SUCCESS(f"{config.label}: {summary} ({time.monotonic() - started:.1f}s)"))
        if not models:
            for label, count in remove_unregistered(batch_size).items():
                self.stdout.write(f"{label}: {count} deleted (no longer registered)")
        if not options["no_passages"]:
            lexemes = refresh_lexeme_stats()
            self.stdout.write(f"Full-text statistics rebuilt ({lexemes} lexemes).")
        if failures:
            # After all the rest is done, so that a scheduled run still fails loudly (a non-zero exit) for them.
            shown = "; ".join(failures[:10]) + ("; ..." if len(failures) > 10 else "")
            raise CommandError(
                f"{len(failures)} object{'s' if len(failures) != 1 else ''} could not be indexed (their documents are "
                f"left as they were; the log has the tracebacks): {shown}"
            )

    def _progress_bar(self, label: str):
        interactive = self.stdout.isatty() if hasattr(self.stdout, "isatty") else False
        last = [time.monotonic()]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done != total and now - last[0] < (0.2 if interactive else 5):
                return
            last[0] = now
            width = 30
            filled = int(width * done / total) if total else width
            line = f"{label}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
            if interactive:
                self.stdout.write("\r" + line, ending="")
                if done == total:
                    self.stdout.write("")
            else:
                self.stdout.write(line)

        return progress
