"""An editor's key text keeps its language tag as the templates read it (``FR`` is ``fr``, ``pt_BR`` is ``pt-br``)
however the row is written: in code, from a fixture, or stored before tags were normalised (the data migration
0013). The admin already did so; a row made anywhere else was stored as written, so ``FR`` and ``fr`` could both
exist for one key, and the template published whichever of the two the database returned last."""

from __future__ import annotations

import importlib
import itertools
import json
import logging
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agent_handshake.concierge import template_publishing
from agent_handshake.models import SchemaKeyText, SchemaTemplate
from agent_handshake.registry import capability_registry

pytestmark = pytest.mark.django_db

MIGRATION = "agent_handshake.migrations.0013_schema_key_text_languages"


@pytest.fixture
def booking_template() -> SchemaTemplate:
    return template_publishing.current(capability_registry.get("book_appointment"))


def served(client, language: str) -> dict[str, str]:
    """The key texts an agent reads in ``language``, through the draft's method on the real endpoint."""
    body = {"method": "get_schema_template", "params": {"scenario": "book_appointment", "preferred_language": language}}
    response = client.post("/schema-templates", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    return {key["key_name"]: key["semantic_description"] for key in response.json()["keys"]}


def stored_as_written(text: SchemaKeyText, language: str, edited_at=None) -> None:
    """What a row written before tags were normalised looks like: saved as given (in SQL: the ORM normalises)."""
    table = SchemaKeyText._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET language = %s WHERE id = %s", [language, text.pk])
        if edited_at is not None:
            cursor.execute(f"UPDATE {table} SET updated_at = %s WHERE id = %s", [edited_at, text.pk])


PLACEHOLDERS = itertools.count()


def text(template: SchemaTemplate, key_name: str, description: str, language: str | None = None) -> SchemaKeyText:
    """A text created in code; without ``language``, under a tag of its own, for :func:`stored_as_written`."""
    language = f"x-{next(PLACEHOLDERS)}" if language is None else language
    return SchemaKeyText.objects.create(
        template=template, key_name=key_name, language=language, semantic_description=description
    )


# --- every save path keeps the tag as the templates read it -------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "kept"), [("FR", "fr"), ("pt_BR", "pt-br"), ("PT-br", "pt-br"), (" De_CH ", "de-ch"), ("", "")]
)
def test_a_text_created_in_code_keeps_its_language_as_the_templates_read_it(booking_template, written, kept):
    row = text(booking_template, "name", "Le nom.", language=written)
    assert row.language == kept
    assert SchemaKeyText.objects.get(pk=row.pk).language == kept


def test_a_text_saved_again_or_loaded_from_a_fixture_keeps_its_language_normalised(booking_template, tmp_path):
    row = text(booking_template, "name", "Le nom.", language="fr")
    row.language = "FR_ca"
    row.save()
    assert SchemaKeyText.objects.get(pk=row.pk).language == "fr-ca"
    row.language = "ES"
    row.save(update_fields=["language"])
    assert SchemaKeyText.objects.get(pk=row.pk).language == "es"

    # loaddata saves raw (Model.save_base, not save()): a fixture written with "DE" is stored as "de".
    fixture = tmp_path / "texts.json"
    fixture.write_text(json.dumps([{
        "model": "agent_handshake.schemakeytext",
        "fields": {"template": booking_template.pk, "key_name": "email", "language": "DE",
                   "semantic_description": "Die Adresse.", "updated_at": "2026-01-01T00:00:00Z"},
    }]))  # fmt: skip
    call_command("loaddata", str(fixture), verbosity=0)
    assert SchemaKeyText.objects.get(key_name="email").language == "de"


def test_queries_update_and_bulk_create_read_and_write_the_tag_as_the_templates_do(booking_template):
    """The ORM's other paths take the tag as the templates read it too: a lookup ``filter(language="FR")`` finds
    the ``fr`` text, ``update_or_create(language="FR")`` updates it rather than failing on the unique constraint,
    and ``QuerySet.update()`` and ``bulk_create()``, which send no signal and call no ``save()``, store ``pt-br``
    for ``PT_br``."""
    row = text(booking_template, "name", "Le nom.", language="fr")
    assert SchemaKeyText.objects.filter(language="FR").get() == row
    assert SchemaKeyText.objects.filter(language__in=["FR", "de"]).get() == row
    updated, created = SchemaKeyText.objects.update_or_create(
        template=booking_template, key_name="name", language="FR", defaults={"semantic_description": "Votre nom."}
    )
    assert (updated.pk, created) == (row.pk, False)
    assert SchemaKeyText.objects.get().semantic_description == "Votre nom."

    SchemaKeyText.objects.filter(pk=row.pk).update(language="PT_br")
    SchemaKeyText.objects.bulk_create(
        [SchemaKeyText(template=booking_template, key_name="email", language=" DE_ch", semantic_description="Die.")]
    )
    assert sorted(SchemaKeyText.objects.values_list("language", flat=True)) == ["de-ch", "pt-br"]


def test_a_second_text_in_the_same_language_however_written_is_refused(booking_template):
    """``create()`` runs no model validation (Django's rule): the database's unique constraint refuses the second
    row with an ``IntegrityError``, since both are now stored as ``fr``. ``full_clean()`` (what a ModelForm runs)
    says so before any write, as a ``ValidationError``: ``clean()`` normalises the tag before the constraint is
    checked."""
    text(booking_template, "name", "Le nom.", language="FR")
    with pytest.raises(IntegrityError), transaction.atomic():
        text(booking_template, "name", "Un autre nom.", language="fr")
    second = SchemaKeyText(template=booking_template, key_name="name", language="Fr", semantic_description="Encore.")
    with pytest.raises(ValidationError) as refused:
        second.full_clean()
    assert [error.code for error in refused.value.error_dict["__all__"]] == ["unique_together"]
    assert second.language == "fr"
    assert list(SchemaKeyText.objects.values_list("language", "semantic_description")) == [("fr", "Le nom.")]
    # Another key, or another language, is another text.
    text(booking_template, "email", "Le courriel.", language="FR")
    text(booking_template, "name", "Der Name.", language="DE")
    assert SchemaKeyText.objects.count() == 3


# --- texts stored twice in one language: the template serves the one edited last -----------------------------------


def test_of_two_texts_stored_in_one_language_the_template_serves_the_one_edited_last(booking_template, client):
    """Rows ``QuerySet.update`` or ``bulk_create`` stored un-normalised (they bypass ``save()``): the template
    published the text the database happened to return last; it serves the most recently edited one."""
    now = timezone.now()
    newer = text(booking_template, "name", "Le nom, comme écrit en dernier.", language="fr")
    older = text(booking_template, "name", "Le nom, ancien.")
    # Which of the two the database returns last (here, by the unique index's collation, "FR" after "fr") is not
    # which was edited last.
    stored_as_written(newer, "fr", now)
    stored_as_written(older, "FR", now - timedelta(days=3))
    template_publishing.publish(capability_registry.get("book_appointment"))
    assert served(client, "fr")["name"] == "Le nom, comme écrit en dernier."
    assert served(client, "FR")["name"] == "Le nom, comme écrit en dernier."


# --- the data migration -----------------------------------------------------------------------------------------


def test_the_migration_normalises_stored_tags_and_keeps_every_text(booking_template, client, caplog):
    migration = importlib.import_module(MIGRATION)
    now = timezone.now()
    day = timedelta(days=1)
    # No collision: the tag is normalised, the row and its text unchanged.
    alone = text(booking_template, "service", "Le service.")
    stored_as_written(alone, "ES_mx", now - day)
    # Two different texts, the un-normalised one edited last: it is kept, the other's text appended to it.
    old_fr = text(booking_template, "name", "Le nom (ancien).", language="fr")
    new_fr = text(booking_template, "name", "Le nom (récent).")
    stored_as_written(old_fr, "fr", now - 2 * day)
    stored_as_written(new_fr, "FR", now - day)
    # The same text twice: one row, the text once.
    same_a = text(booking_template, "email", "O e-mail.")
    same_b = text(booking_template, "email", "O e-mail.")
    stored_as_written(same_a, "pt_BR", now - 2 * day)
    stored_as_written(same_b, "PT-br", now - day)
    # The one edited last is blank: it takes the other's text.
    blank = text(booking_template, "date", "x")
    full = text(booking_template, "date", "Das Datum.")
    stored_as_written(blank, "de-ch", now - day)
    stored_as_written(full, "DE_ch", now - 2 * day)
    SchemaKeyText.objects.filter(pk=blank.pk).update(semantic_description="")
    # Edited at the same moment: the row already written as the templates read it is kept.
    tie_norm = text(booking_template, "time", "L'ora.", language="it")
    tie_upper = text(booking_template, "time", "Orario.")
    stored_as_written(tie_norm, "it", now - day)
    stored_as_written(tie_upper, "IT", now - day)
    # The default text is not touched.
    default = text(booking_template, "party_size", "How many people.", language="")
    every_text_before = set(
        SchemaKeyText.objects.exclude(semantic_description="").values_list("semantic_description", flat=True)
    )

    # Published as it stood (the texts' own saves marked it stale): the migration must have it published again.
    published = template_publishing.publish(capability_registry.get("book_appointment")).published
    assert published["translations"]["fr"]["name"] == "Le nom (récent)."

    with caplog.at_level(logging.WARNING), connection.schema_editor(atomic=False) as editor:
        migration.normalise_languages(apps, editor)

    rows = {(row.key_name, row.language): (row.pk, row.semantic_description) for row in SchemaKeyText.objects.all()}
    assert rows == {
        ("service", "es-mx"): (alone.pk, "Le service."),
        ("name", "fr"): (new_fr.pk, "Le nom (récent).\n\nLe nom (ancien)."),
        ("email", "pt-br"): (same_b.pk, "O e-mail."),
        ("date", "de-ch"): (blank.pk, "Das Datum."),
        ("time", "it"): (tie_norm.pk, "L'ora.\n\nOrario."),
        ("party_size", ""): (default.pk, "How many people."),
    }
    # Nothing lost: every text stored before is in a kept row.
    kept = "\n\n".join(description for _, description in rows.values())
    assert all(before in kept for before in every_text_before)
    # Each dropped row is named in a warning, with the row kept; a row only renamed is not.
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    for dropped, kept_row in ((old_fr, new_fr), (same_a, same_b), (full, blank), (tie_upper, tie_norm)):
        assert any(f"#{dropped.pk} " in warning and f"#{kept_row.pk} " in warning for warning in warnings), warnings
    assert len(warnings) == 4
    assert not any(f"#{alone.pk} " in warning for warning in warnings)

    # Agents read the kept texts in that language, however they write the tag.
    assert served(client, "FR")["name"] == "Le nom (récent).\n\nLe nom (ancien)."
    assert served(client, "pt_BR")["email"] == "O e-mail."
    assert served(client, "de-CH")["date"] == "Das Datum."
    assert served(client, "es-MX")["service"] == "Le service."
    assert served(client, "it")["time"] == "L'ora.\n\nOrario."

    # Run again, it changes nothing; it can be reversed (a no-op).
    before = sorted(SchemaKeyText.objects.values_list("pk", "language", "semantic_description"))
    with connection.schema_editor(atomic=False) as editor:
        migration.normalise_languages(apps, editor)
    assert sorted(SchemaKeyText.objects.values_list("pk", "language", "semantic_description")) == before
    operation = migration.Migration.operations[0]
    assert operation.reversible


def test_the_migration_runs_through_the_migration_executor(booking_template, client):
    """The migration as ``migrate`` runs it: after 0012, with the historical models, which send no signal to the
    app's receivers, so the migration itself has the templates it changed published again."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    node = ("agent_handshake", MIGRATION.rsplit(".", 1)[1])
    assert ("agent_handshake", "0012_insights") in {
        parent.key for parent in executor.loader.graph.node_map[node].parents
    }
    assert node in executor.loader.applied_migrations  # the test database was migrated through it
    state = executor.loader.project_state(node)
    historical = state.apps.get_model("agent_handshake", "SchemaKeyText")
    older, newer = text(booking_template, "name", "Le nom."), text(booking_template, "name", "Le nom complet.")
    stored_as_written(older, "fr", timezone.now() - timedelta(days=1))
    stored_as_written(newer, "FR", timezone.now())
    assert template_publishing.publish(capability_registry.get("book_appointment")).published["translations"]["fr"] == {
        "name": "Le nom complet."
    }
    migration = importlib.import_module(MIGRATION)
    with connection.schema_editor(atomic=False) as editor:
        migration.normalise_languages(state.apps, editor)
    assert list(historical.objects.values_list("pk", "language", "semantic_description")) == [
        (newer.pk, "fr", "Le nom complet.\n\nLe nom.")
    ]
    assert served(client, "fr")["name"] == "Le nom complet.\n\nLe nom."
