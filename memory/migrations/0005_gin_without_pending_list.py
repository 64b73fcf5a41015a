"""Recall's two GIN indexes write through, with no pending list.

With `fastupdate` on, PostgreSQL appends new GIN entries to a pending list and every search
reads the whole list until a vacuum or a full list (4 MB) merges it. Recall itself feeds
that list: each recall bumps the surfaced rows' usage counters, the recency index holds
`last_referenced_at`, so those updates are not HOT and insert every GIN key again. Measured
on the 1M-row bench after a few hundred recalls: one term lookup read 355 pages in 5.7 ms
with the list, 2 pages in 0.03 ms without it; a 1k member's recall went from ~50 to ~23 ms
in-process. Writing through costs the insert a little instead.
"""

from django.db import migrations

INDEXES = ("memory_recall_terms", "memory_recall_trgm")


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {index} SET (fastupdate = off)")
        # Merge what is already pending; a later vacuum would, but reads pay until then.
        schema_editor.execute(
            f"SELECT gin_clean_pending_list(to_regclass('{index}')) "
            f"WHERE to_regclass('{index}') IS NOT NULL"
        )


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {index} RESET (fastupdate)")


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_recall_terms_column")]

    operations = [migrations.RunPython(forward, backward)]
