"""Recall's term index, on a stored column rather than a SQL copy of the tokeniser.

A first draft of 0003 indexed `iris_recall_member_terms(member_id, body)`, a PL/pgSQL
re-implementation of `memory.lexical.terms` (the DROPs below remove it where it was
applied). When the planner filtered a scan with that function instead of using the index,
it ran it row by row (about 0.3 ms a row: 1.6 s for one recall of a 1k member). Here each
revision stores its own term keys, computed at insert by the Python `terms` itself
(`memory.models.recall_term_keys`), and the GIN index is on
`string_to_array(recall_terms, ' ')`, which costs microseconds a row however it is
planned. There is one tokeniser.
"""

from django.db import migrations

import memory.models

BATCH = 2000

PG_FORWARD = [
    "DROP INDEX IF EXISTS memory_recall_terms",
    "DROP FUNCTION IF EXISTS iris_recall_member_terms(bigint, text)",
    "DROP FUNCTION IF EXISTS iris_recall_terms(text)",
    "DROP FUNCTION IF EXISTS iris_recall_stem(text)",
    "CREATE INDEX IF NOT EXISTS memory_recall_terms ON memory_memoryentry "
    "USING gin (string_to_array(recall_terms, ' ')) "
    "WHERE is_current AND lifecycle = 'active'",
]


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    entry = apps.get_model("memory", "MemoryEntry")
    table = entry._meta.db_table
    last = None
    with schema_editor.connection.cursor() as cursor:
        while True:
            where, params = ("WHERE revision_id > %s", [last]) if last is not None else ("", [])
            cursor.execute(
                f"SELECT revision_id, member_id, body FROM {table} {where} "  # noqa: S608
                f"ORDER BY revision_id LIMIT {BATCH}",
                params,
            )
            rows = cursor.fetchall()
            if not rows:
                break
            cursor.executemany(
                f"UPDATE {table} SET recall_terms = %s WHERE revision_id = %s",  # noqa: S608
                [(memory.models.recall_term_keys(m, body), r) for r, m, body in rows],
            )
            last = rows[-1][0]


def pg_forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_FORWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_recall_term_index")]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="recall_terms",
            field=memory.models.RecallTermsField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunPython(pg_forward, migrations.RunPython.noop),
    ]
