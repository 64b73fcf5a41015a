"""Each revision stores its body's recall words: its BM25 terms with their counts and its
Jaccard tokens (`memory.models.recall_words`), computed at insert by the tokenisers
themselves, so that building a member's recall snapshot reads them instead of tokenising
every body again. Existing rows are filled in batches; a row the snapshot finds without
them (null) is tokenised from its body as before.
"""

from django.db import migrations

import memory.models

BATCH = 2000


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    entry = apps.get_model("memory", "MemoryEntry")
    table = entry._meta.db_table
    last = None
    with schema_editor.connection.cursor() as cursor:
        while True:
            where, params = ("WHERE revision_id > %s", [last]) if last is not None else ("", [])
            cursor.execute(
                f"SELECT revision_id, body FROM {table} {where} "  # noqa: S608
                f"ORDER BY revision_id LIMIT {BATCH}",
                params,
            )
            rows = cursor.fetchall()
            if not rows:
                break
            cursor.executemany(
                f"UPDATE {table} SET recall_words = %s WHERE revision_id = %s",  # noqa: S608
                [(memory.models.recall_words(body), r) for r, body in rows],
            )
            last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("memory", "0010_retention_review_flag")]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="recall_words",
            field=memory.models.RecallWordsField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
