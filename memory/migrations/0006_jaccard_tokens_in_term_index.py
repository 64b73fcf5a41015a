"""Jaccard's tokens join the term index; the trigram and non-ASCII indexes go.

The default (Jaccard) ranker found the rows sharing a word with the query by `ILIKE
'%word%'` over the member's rows, with a trigram GIN index to help. Each row now also
stores its Jaccard tokens in `recall_terms` ("42:~walked", see
`memory.models.recall_term_keys`), so that ranker asks the term index for the rows holding
any query token, exactly, as the BM25 rankers ask it for their terms. Nothing reads the
trigram index any more, nor the index of non-ASCII bodies (those bodies carry the key
"42:" in the term index). Both were written on every insert and on every recall's reference
bump (roughly forty trigrams a row); without them a 1k member's recall measured ~37 ->
~29 ms in-process, the bump ~3.7 -> ~2.2 ms, and the planner has two indexes fewer to weigh.
"""

import importlib

from django.db import migrations

# Recompute every row's keys with the current `recall_term_keys` (0004's batched backfill).
backfill = importlib.import_module("memory.migrations.0004_recall_terms_column").backfill

PG_FORWARD = [
    "DROP INDEX IF EXISTS memory_recall_trgm",
    "DROP INDEX IF EXISTS memory_recall_nonascii",
]
PG_BACKWARD = [
    "CREATE INDEX IF NOT EXISTS memory_recall_trgm ON memory_memoryentry "
    "USING gin (member_id, body gin_trgm_ops) WHERE is_current AND lifecycle = 'active'",
    "CREATE INDEX IF NOT EXISTS memory_recall_nonascii ON memory_memoryentry "
    "(tenant_id, member_id) "
    "WHERE is_current AND lifecycle = 'active' AND octet_length(body) <> char_length(body)",
]


def _on_postgres(statements):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_gin_short_pending_list")]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunPython(_on_postgres(PG_FORWARD), _on_postgres(PG_BACKWARD)),
    ]
