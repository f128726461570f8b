"""Editors' key texts get their language tag as the templates read it (``FR`` is ``fr``, ``pt_BR`` is ``pt-br``,
see ``models.schema_templates.language_tag``), as the model now stores it on every save.

Texts written before, in code or by the admin, may hold one key's text twice in one language (``fr`` and ``FR``),
which the unique constraint let through and the template published only one of. Such rows are made one, and no
text is lost:

- the row kept is the one edited last (``updated_at``); at the same moment, the one already written as the
  templates read it, then the newest row (highest id);
- a dropped row whose text is blank or the same as one kept (spaces aside) gives nothing;
- if the kept row's text is blank, it takes the dropped row's text;
- otherwise the dropped row's text is appended to the kept one after a blank line (the most recent first), for
  an editor to shorten: both were written for this key and language, and which one agents were served was
  chance. (The result may be longer than the admin's 2000 characters: the admin then asks for a shorter text.)

Keeping only the newest text would delete an editor's work unseen; leaving a row un-normalised would keep the
duplicate the templates cannot tell apart. An appended text is seen by the next editor on the template's page,
and by agents meanwhile as one more description of the same key.

Each dropped row is logged as a warning naming it, the row kept and what became of its text. The templates of
the rows changed are marked stale, so that the next read publishes them again (a copy in a shared cache lives
``STATE_TTL`` seconds more). Reversing does nothing: the tags were equivalent, and the merged rows cannot be told
apart again.
"""

import logging
from collections import defaultdict

from django.db import migrations

# The one normalisation the model, the admin and the templates use: a database migrated later gets the tags the
# model would store then.
from agent_handshake.models.schema_templates import language_tag

logger = logging.getLogger(__name__)


def normalise_languages(apps, schema_editor):
    SchemaKeyText = apps.get_model("agent_handshake", "SchemaKeyText")
    SchemaTemplate = apps.get_model("agent_handshake", "SchemaTemplate")
    db = schema_editor.connection.alias
    rows = SchemaKeyText.objects.using(db).order_by("pk")
    groups = defaultdict(list)
    for row in rows.only("pk", "template_id", "key_name", "language", "updated_at", "semantic_description"):
        groups[row.template_id, row.key_name, language_tag(row.language)].append(row)
    changed_templates = set()
    for (template_id, key_name, tag), group in groups.items():
        if all(row.language == tag for row in group):
            continue  # one row, already as the templates read it (the constraint allows no second)
        # The most recent edit first; at the same moment the row already normalised, then the newest row.
        group.sort(key=lambda row: (row.updated_at, row.language == tag, row.pk), reverse=True)
        kept, dropped = group[0], group[1:]
        texts = [kept.semantic_description]
        for row in dropped:
            text = row.semantic_description
            if not text.strip():
                fate = "its text was blank"
            elif text.strip() in {t.strip() for t in texts}:
                fate = "the kept row has the same text"
            elif not any(t.strip() for t in texts):
                texts.append(text)
                fate = "the kept row had no text and took its text"
            else:
                texts.append(text)
                fate = "its text was appended to the kept row's"
            logger.warning(
                "SchemaKeyText #%s (template #%s, key %r, language %r) was dropped for #%s (language %r, edited "
                "at %s, which becomes %r): %s.",
                row.pk, template_id, key_name, row.language, kept.pk, kept.language, kept.updated_at, tag, fate,
            )  # fmt: skip
        SchemaKeyText.objects.using(db).filter(pk__in=[row.pk for row in dropped]).delete()
        description = "\n\n".join(text for text in texts if text.strip()) or kept.semantic_description
        # QuerySet.update: no auto_now, the row keeps the time an editor last changed it.
        SchemaKeyText.objects.using(db).filter(pk=kept.pk).update(language=tag, semantic_description=description)
        changed_templates.add(template_id)
    if changed_templates:
        # As template_publishing.changed does: a template whose source digest differs is published again on its next read.
        SchemaTemplate.objects.using(db).filter(pk__in=changed_templates).update(source_digest="")


class Migration(migrations.Migration):
    dependencies = [
        ("agent_handshake", "0012_insights"),
    ]

    operations = [
        migrations.RunPython(normalise_languages, migrations.RunPython.noop),
    ]
