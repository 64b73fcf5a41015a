"""Recall's gate statistics and covering index (PostgreSQL).

`memory_recall_gates` holds every column the database gates test, so counting a member's
gated rows (BM25's document count) reads the index only. The statistics object tells the
planner that a scope key names its member and the member its tenant.

(The term index itself is migration 0004. A first draft of this migration indexed a
PL/pgSQL copy of the tokeniser; 0004 drops it wherever it was applied.)
"""

from django.db import migrations

PG_FORWARD = [
    # Without this the planner multiplies the three selectivities, expects a handful of rows
    # and sorts instead of walking memory_recall_recency.
    "CREATE STATISTICS IF NOT EXISTS memory_recall_member_scope (dependencies) "
    "ON tenant_id, member_id, scope_key FROM memory_memoryentry",
    "CREATE INDEX IF NOT EXISTS memory_recall_gates ON memory_memoryentry "
    "(tenant_id, member_id, scope_key) "
    "INCLUDE (adapter_scope, category, suppression_reason, suppression_ends_at) "
    "WHERE is_current AND lifecycle = 'active'",
]
PG_BACKWARD = [
    "DROP STATISTICS IF EXISTS memory_recall_member_scope",
    "DROP INDEX IF EXISTS memory_recall_gates",
]


def pg_forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_FORWARD:
            schema_editor.execute(statement)


def pg_backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        for statement in PG_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_recall")]

    operations = [migrations.RunPython(pg_forward, pg_backward)]
