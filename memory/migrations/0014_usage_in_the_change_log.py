"""A usage bump's note carries the new counters, so a catch-up need not read the row.

Most of what a worker's snapshot catches up on is other workers' recalls: each bumps the
reference count (and the last referenced time) of the rows it returned, and each bumped
row was read back by primary key at the next look of every other worker. The update
trigger now compares each row's old and new versions: when nothing the snapshot holds
changed but the counters, the note keeps the new reference count and recency anchor
(`COALESCE(last_referenced_at, updated_at)` as epoch seconds, the expression the snapshot
reads), and the catch-up takes them from the note (docs/decisions/recall.md, "Usage
bumps carried by the change log"). Any other change leaves both columns null, and the row
is read as before.
"""

from django.db import migrations

# Every column a snapshot reads about a stored row (memory.recall.snapshot._LIGHT) but the
# two counters, plus the row's owner.
HELD = (
    "entry_id, tenant_id, member_id, is_current, lifecycle, scope_key, adapter_scope, "
    "category, subject, origin, suppression_reason, suppression_ends_at, updated_at, "
    "actor_handle, sensitive_interaction"
)


def _row(alias: str) -> str:
    return "(" + ", ".join(f"{alias}.{c.strip()}" for c in HELD.split(",")) + ")"


FORWARD = """
ALTER TABLE memory_recallchange ADD COLUMN reference_count integer, ADD COLUMN anchor float8;

CREATE FUNCTION memory_note_recall_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_recallchange (member_id, revision_id, reference_count, anchor)
    SELECT n.member_id, n.revision_id,
           CASE WHEN u.usage_only THEN n.reference_count END,
           CASE WHEN u.usage_only
                THEN EXTRACT(EPOCH FROM COALESCE(n.last_referenced_at, n.updated_at))::float8
           END
    FROM new_rows AS n
    LEFT JOIN old_rows AS o ON o.revision_id = n.revision_id
    CROSS JOIN LATERAL (
        SELECT o.revision_id IS NOT NULL AND OLD_HELD IS NOT DISTINCT FROM NEW_HELD AS usage_only
    ) AS u;
    RETURN NULL;
END $$;

DROP TRIGGER memory_entry_updated ON memory_memoryentry;
CREATE TRIGGER memory_entry_updated AFTER UPDATE ON memory_memoryentry
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION memory_note_recall_update();
""".replace("OLD_HELD", _row("o")).replace("NEW_HELD", _row("n"))

BACKWARD = """
DROP TRIGGER memory_entry_updated ON memory_memoryentry;
CREATE TRIGGER memory_entry_updated AFTER UPDATE ON memory_memoryentry
REFERENCING NEW TABLE AS changed_rows
FOR EACH STATEMENT EXECUTE FUNCTION memory_note_recall_change();
DROP FUNCTION memory_note_recall_update();
ALTER TABLE memory_recallchange DROP COLUMN reference_count, DROP COLUMN anchor;
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("memory", "0013_no_index_holds_usage")]

    operations = [migrations.RunPython(forward, backward)]
