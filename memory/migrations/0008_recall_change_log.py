"""A log of which of a member's revisions changed, for recall's member snapshots.

Each web worker keeps what ranking needs about a member's rows in memory
(memory.recall_snapshot) and brings it up to date at every recall by reading the revisions
changed since its last look. Triggers note every insert, update and delete of a memory
row, and of a stored embedding, with the writing transaction's id. A reader asks for the
rows noted by the transactions its last look could not see: those still running then, and
those that began after (`pg_snapshot_xip`, `pg_snapshot_xmax`). So a transaction that
commits late is never skipped, whatever order the transactions committed in. No lock is
taken, so a bump cannot deadlock with a write.

The log holds ids only, never text. `memory.tasks.prune_recall_changes` deletes what is
older than `IRIS_RECALL_CHANGES_KEEP_SECONDS`; snapshots are rebuilt well within that.
PostgreSQL only: on SQLite recall does not keep snapshots.
"""

from django.db import migrations

FORWARD = """
CREATE TABLE memory_recallchange (
    id bigserial PRIMARY KEY,
    member_id bigint NOT NULL,
    revision_id uuid NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    noted_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX memory_recallchange_member_xid ON memory_recallchange (member_id, xid);
CREATE INDEX memory_recallchange_noted ON memory_recallchange (noted_at);

CREATE FUNCTION memory_note_recall_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_recallchange (member_id, revision_id)
    SELECT member_id, revision_id FROM changed_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_note_embedding_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_recallchange (member_id, revision_id)
    SELECT m.member_id, m.revision_id
    FROM changed_rows AS c JOIN memory_memoryentry AS m ON m.revision_id = c.revision_id;
    RETURN NULL;
END $$;

"""

# Each table's statements, noted by its function: (trigger prefix, table, function).
TABLES = [
    ("memory_entry", "memory_memoryentry", "memory_note_recall_change"),
    ("memory_embedding", "memory_memoryembedding", "memory_note_embedding_change"),
]
# (trigger suffix, event, the transition table holding the rows it touched)
EVENTS = [("inserted", "INSERT", "NEW"), ("updated", "UPDATE", "NEW"), ("deleted", "DELETE", "OLD")]
TRIGGERS = [
    (f"{prefix}_{suffix}", table, event, rows, function)
    for prefix, table, function in TABLES
    for suffix, event, rows in EVENTS
]


def _triggers() -> str:
    return "".join(
        f"CREATE TRIGGER {name} AFTER {event} ON {table} "
        f"REFERENCING {rows} TABLE AS changed_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}();\n"
        for name, table, event, rows, function in TRIGGERS
    )


BACKWARD = "".join(f"DROP TRIGGER {name} ON {table};\n" for name, table, *_ in TRIGGERS) + (
    "DROP FUNCTION memory_note_embedding_change();\n"
    "DROP FUNCTION memory_note_recall_change();\n"
    "DROP TABLE memory_recallchange;\n"
)


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD + _triggers())


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("memory", "0007_room_for_usage_bumps")]

    operations = [migrations.RunPython(forward, backward)]
