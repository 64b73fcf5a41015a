"""No index holds a memory's usage counters, so every recall's bump is a HOT update.

`memory_recall_recency` ordered a member's active rows by `COALESCE(last_referenced_at,
updated_at)` for the streaming fast path (`memory.recall.db.fast_resolve`). Recall no
longer streams: it ranks from the member snapshot, and the streaming path is the reference
the tests and `bench/recall.py` compare against, where a sort over the member's gated rows
is enough. While the index held the last referenced time, the first bump of every row (and
any bump a minute after the last) was a new row version with an entry in each of the
table's indexes, the GIN term index included (docs/decisions/recall.md, "No index holds the
usage counters").
"""

from django.db import migrations

FORWARD = "DROP INDEX IF EXISTS memory_recall_recency"
BACKWARD = (
    "CREATE INDEX IF NOT EXISTS memory_recall_recency ON memory_memoryentry "
    "(tenant_id, member_id, (COALESCE(last_referenced_at, updated_at)) DESC, entry_id) "
    "WHERE is_current AND lifecycle = 'active'"
)


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("memory", "0012_index_inactive_current_rows")]

    operations = [migrations.RunPython(forward, backward)]
