"""Memory rows leave room on their page for a recall's usage bump.

A recall bumps the surfaced rows' reference count and, at most once a minute, their last
referenced time (memory.recall_service.LAST_REFERENCED_RESOLUTION). A bump that leaves
every indexed column alone can be a HOT update, which adds no index entry, but only when
the new row version fits on the same page. With full pages (fillfactor 100) every bump
wrote a new entry into each of the table's 14 indexes; on the 1M-row bench the GIN term
index handed a 10k member's recall 21,000 entries for 1,876 live rows after a few
thousand recalls. 85 leaves about one row's room on an 8 kB page of these rows.

Rows written from now on get the room; pages already full get it as a vacuum prunes them
(or at once with VACUUM FULL, which rewrites the table and locks it while it runs).
"""

from django.db import migrations

FILLFACTOR = 85


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE memory_memoryentry SET (fillfactor = {FILLFACTOR})")


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE memory_memoryentry RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_jaccard_tokens_in_term_index")]

    operations = [migrations.RunPython(forward, backward)]
