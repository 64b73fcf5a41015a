"""Recall's two GIN indexes keep a short pending list (64 kB instead of 4 MB).

PostgreSQL appends new GIN entries to a pending list, and every search reads the whole
list until a vacuum or a full list merges it. Recall itself feeds that list: each recall
bumps the surfaced rows' usage counters, the recency index holds `last_referenced_at`, so
those updates are not HOT and add every GIN key again. Measured on the 1M-row bench after
a few hundred recalls: one term lookup read 355 pages in 5.7 ms with a full-size list and
2 pages in 0.03 ms with none; a 1k member's recall went from ~50 to ~23 ms in-process.
With no list at all (`fastupdate = off`) each bump of 12 rows cost 7.7 ms instead of
3 ms; a 64 kB list bounds a search's extra reading to a few pages and keeps bumps cheap.
"""

from django.db import migrations

INDEXES = ("memory_recall_terms", "memory_recall_trgm")


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(
            f"ALTER INDEX IF EXISTS {index} SET (fastupdate = on, gin_pending_list_limit = 64)"
        )
        # Merge what is already pending; a later vacuum would, but reads pay until then.
        schema_editor.execute(
            f"SELECT gin_clean_pending_list(to_regclass('{index}')) "
            f"WHERE to_regclass('{index}') IS NOT NULL"
        )


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(
            f"ALTER INDEX IF EXISTS {index} RESET (fastupdate, gin_pending_list_limit)"
        )


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_recall_terms_column")]

    operations = [migrations.RunPython(forward, backward)]
