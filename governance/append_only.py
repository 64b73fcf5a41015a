"""Database triggers that make a ledger table append-only, on PostgreSQL and SQLite alike.

Migrations install them; tests that need to tamper drop them inside a transaction.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION iris_reject_ledger_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'iris: % on % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END
$$;
"""


def install_sql(vendor: str, table: str, *, allow_delete: bool = False) -> list[str]:
    ops = "UPDATE" if allow_delete else "UPDATE OR DELETE"
    if vendor == "postgresql":
        statements = [
            PG_FUNCTION,
            f'CREATE TRIGGER "{table}_append_only" BEFORE {ops} ON "{table}" '
            "FOR EACH ROW EXECUTE FUNCTION iris_reject_ledger_change();",
        ]
        if not allow_delete:
            statements.append(
                f'CREATE TRIGGER "{table}_no_truncate" BEFORE TRUNCATE ON "{table}" '
                "FOR EACH STATEMENT EXECUTE FUNCTION iris_reject_ledger_change();"
            )
        return statements
    if vendor == "sqlite":
        verbs = ["UPDATE"] if allow_delete else ["UPDATE", "DELETE"]
        return [
            f'CREATE TRIGGER "{table}_no_{verb.lower()}" BEFORE {verb} ON "{table}" '
            f"BEGIN SELECT RAISE(ABORT, 'iris: {verb} on {table} is refused: the table is "
            "append-only'); END;"
            for verb in verbs
        ]
    raise NotImplementedError(f"append-only triggers are not written for {vendor}")


def uninstall_sql(vendor: str, table: str) -> list[str]:
    if vendor == "postgresql":
        return [
            f'DROP TRIGGER IF EXISTS "{table}_append_only" ON "{table}";',
            f'DROP TRIGGER IF EXISTS "{table}_no_truncate" ON "{table}";',
        ]
    return [
        f'DROP TRIGGER IF EXISTS "{table}_no_update";',
        f'DROP TRIGGER IF EXISTS "{table}_no_delete";',
    ]


# Every append-only table and whether its rows may be deleted (erasure of personal fields).
LEDGER_TABLES: dict[str, bool] = {}


def register(table: str, *, allow_delete: bool = False) -> None:
    LEDGER_TABLES[table] = allow_delete


def install(connection: BaseDatabaseWrapper, table: str, *, allow_delete: bool = False) -> None:
    with connection.cursor() as cursor:
        for statement in install_sql(connection.vendor, table, allow_delete=allow_delete):
            cursor.execute(statement)


def uninstall(connection: BaseDatabaseWrapper, table: str) -> None:
    with connection.cursor() as cursor:
        for statement in uninstall_sql(connection.vendor, table):
            cursor.execute(statement)


def migration_operations(table: str, *, allow_delete: bool = False):
    """RunPython operations for a migration: install forwards, remove backwards."""
    from django.db import migrations

    def forwards(apps, schema_editor):
        install(schema_editor.connection, table, allow_delete=allow_delete)

    def backwards(apps, schema_editor):
        uninstall(schema_editor.connection, table)

    return migrations.RunPython(forwards, backwards)
