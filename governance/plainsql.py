"""Plain SQL for the few reads every API call makes.

The ORM compiles a query afresh on every call, and for the small indexed lookups of the
write and auth paths that compilation cost more CPU than PostgreSQL spent answering.
These helpers build each statement once and hand rows back as ordinary model instances.
Use them only for hot, simple lookups; everything else stays in the ORM.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, TypeVar, cast

from django.db import connection, models
from django.db.models import ForeignObjectRel

M = TypeVar("M", bound=models.Model)


def cursor() -> Any:
    """A cursor for one statement: the connection's kept cursor where the backend has one
    (iris_site.postgresql), else a fresh one. Use it in a `with` block, as any cursor."""
    kept = getattr(connection, "kept_cursor", None)
    return kept() if kept is not None else connection.cursor()


# How a statement planned once is planned. A generic plan knows no parameter's value, so
# it guesses that a third of a range matches; on a large table that guess picked a
# parallel scan (a worker process started at each call) and could pick a whole-table one.
# Neither is ever right for the indexed reads this is for (docs/decisions/recall.md).
_PLANNED_ONCE = {
    "plan_cache_mode": "force_generic_plan",
    "max_parallel_workers_per_gather": "0",
    "enable_seqscan": "off",
}
_SET_PLANNED_ONCE = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', false)" for name, value in _PLANNED_ONCE.items()
)
# Each back to the session's own value with RESET, not through `pg_settings`: that view
# lists every setting the server has, and this runs at every warm recall's catch-up.
_RESET_PLANNED_ONCE = tuple(f"RESET {name}" for name in _PLANNED_ONCE)


def rows_planned_once(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows of one indexed read that PostgreSQL plans once per session (its generic
    plan, kept to index scans in one process) rather than at every call.

    For a statement whose generic plan the estimates make look dear, the server plans
    anew at each call, even when the plan it picks is always the same. The settings that
    say otherwise go with the statement in one round trip (a pipeline) and are put back
    after it; if the statement fails, its implicit transaction takes them with it.
    Elsewhere, a plain execute.
    """
    with cursor() as cur:
        if connection.vendor != "postgresql":
            cur.execute(sql, list(params))
            return list(cur.fetchall())
        raw = connection.connection
        with connection.wrap_database_errors, raw.pipeline():
            raw.execute(_SET_PLANNED_ONCE)
            cur.execute(sql, list(params))
            for reset in _RESET_PLANNED_ONCE:
                raw.execute(reset)
        return list(cur.fetchall())


def _column(field: models.Field[Any, Any]) -> str:
    # Concrete fields (and primary keys) always have a column; the stubs type `column` for
    # every field, where it may be None.
    return cast(str, field.column)


@cache
def _columns(model: type[models.Model]) -> tuple[str, tuple[str, ...]]:
    fields = model._meta.concrete_fields
    qn = connection.ops.quote_name
    return ", ".join(qn(_column(f)) for f in fields), tuple(f.attname for f in fields)


@cache
def _statement(model: type[models.Model], where: str, suffix: str, source: str = "") -> str:
    columns, _ = _columns(model)
    table = model._meta.db_table
    rows = f"({source}) AS {table}" if source else table
    return f"SELECT {columns} FROM {rows} WHERE {where} {suffix}"  # noqa: S608


@cache
def _converters(model: type[models.Model]) -> tuple[tuple[int, tuple[Any, ...], Any], ...]:
    # What the ORM would apply to each column read (UUIDs from text on SQLite, JSON text).
    out = []
    for i, f in enumerate(model._meta.concrete_fields):
        col = f.get_col(model._meta.db_table)
        fns = tuple(connection.ops.get_db_converters(col) + f.get_db_converters(connection))
        if fns:
            out.append((i, fns, col))
    return tuple(out)


def _build(model: type[M], attnames: tuple[str, ...], row: Sequence[Any]) -> M:
    values = list(row)
    for i, fns, col in _converters(model):
        value = values[i]
        for fn in fns:
            value = fn(value, col, connection)
        values[i] = value
    return model.from_db(connection.alias, attnames, values)


def select(
    model: type[M],
    where: str,
    params: Sequence[Any],
    *,
    suffix: str = "",
    lock: bool = False,
    source: str = "",
) -> list[M]:
    """Rows of `model` matching `where` (a constant SQL fragment with %s placeholders).

    `params` must already be database values (see `prep`), in the order of the text.
    `lock` adds FOR UPDATE where the database has it (SQLite serialises writers anyway).
    `source`: a constant SELECT of the model's rows to read from instead of the whole
    table (on PostgreSQL, with OFFSET 0, it fixes which index finds them).
    """
    if lock and connection.features.has_select_for_update:
        suffix = f"{suffix} FOR UPDATE"
    sql = _statement(model, where, suffix, source)
    _, attnames = _columns(model)
    with cursor() as cur:
        cur.execute(sql, list(params))
        rows = cur.fetchall()
    return [_build(model, attnames, row) for row in rows]


def prep(model: type[models.Model], field: str, value: Any) -> Any:
    """`value` as the database stores `model.field` (a UUID is text on SQLite)."""
    column = model._meta.get_field(field)
    if isinstance(column, ForeignObjectRel):
        raise TypeError(f"{model.__name__}.{field} is a reverse relation, not a column")
    return column.get_db_prep_value(value, connection)


def select_with_one(
    model: type[M],
    related: type[models.Model],
    accessor: str,
    where: str,
    params: Sequence[Any],
    *,
    suffix: str = "",
) -> list[M]:
    """Like `select`, with each row's reverse one-to-one `accessor` (a `related` row whose
    primary key is the link) fetched in the same query, as `select_related` would: reading
    `row.<accessor>` raises DoesNotExist when there is none, and costs no query."""
    sql = _joined_statement(model, related, where, suffix)
    _, attnames = _columns(model)
    _, related_attnames = _columns(related)
    width = len(attnames)
    relation = model._meta.get_field(accessor)
    if not isinstance(relation, ForeignObjectRel):
        raise TypeError(f"{model.__name__}.{accessor} is not a reverse one-to-one")
    cache_name = relation.cache_name
    out = []
    with cursor() as cur:
        cur.execute(sql, list(params))
        rows = cur.fetchall()
    for row in rows:
        obj = _build(model, attnames, row[:width])
        rest = row[width:]
        one = None if rest[0] is None else _build(related, related_attnames, rest)
        obj._state.fields_cache[cache_name] = one
        out.append(obj)
    return out


@cache
def _joined_statement(
    model: type[models.Model], related: type[models.Model], where: str, suffix: str
) -> str:
    qn = connection.ops.quote_name
    base, joined = model._meta.db_table, related._meta.db_table
    own = ", ".join(f"{base}.{qn(_column(f))}" for f in model._meta.concrete_fields)
    theirs = ", ".join(f"{joined}.{qn(_column(f))}" for f in related._meta.concrete_fields)
    link = f"{joined}.{qn(_column(related._meta.pk))} = {base}.{qn(_column(model._meta.pk))}"
    return (
        f"SELECT {own}, {theirs} FROM {base} LEFT JOIN {joined} ON {link} "  # noqa: S608
        f"WHERE {where} {suffix}"
    )


def insert(
    model: type[models.Model],
    objs: Sequence[models.Model],
    *,
    along: Sequence[models.Model] = (),
    riders: Sequence[tuple[str, Sequence[Any]]] = (),
) -> None:
    """INSERT `objs` in one statement, every concrete field but an auto primary key.

    Values go through each field's own preparation (JSON, UUIDs), as `save` would, and an
    auto primary key is read back; no signals are sent, so use it for append-only rows.
    `along` are rows of other tables written by the same statement on PostgreSQL (each
    table a data-modifying WITH; one round trip), one after another elsewhere. Their auto
    primary keys are not read back. A foreign key from an `along` row to one of `objs`
    holds (PostgreSQL checks it when the statement ends, as a revision's vector shows),
    but no part of the statement reads what another part writes. `riders` are other
    data-modifying statements (SQL, parameters) written the same way: PostgreSQL only.
    """
    if not objs:
        return
    if riders and connection.vendor != "postgresql":
        raise ValueError("riders are data-modifying WITH parts: PostgreSQL only")
    if along and connection.vendor != "postgresql":
        insert(model, objs)
        for other, rows in _by_model(along):
            insert(other, rows)
        return
    prefix: list[str] = []
    params: list[Any] = []
    for i, (other, rows) in enumerate(_by_model(along)):
        part, part_params = _rows(other, rows)
        prefix.append(f"a{i} AS ({part})")
        params.extend(part_params)
    for i, (rider, rider_params) in enumerate(riders):
        prefix.append(f"r{i} AS ({rider})")
        params.extend(rider_params)
    sql, own_params = _rows(model, objs)
    if prefix:
        sql = f"WITH {', '.join(prefix)} {sql}"
    params.extend(own_params)
    pk = model._meta.pk
    auto = len(_insert_fields(model)) < len(model._meta.concrete_fields)
    if auto:
        sql += f" RETURNING {connection.ops.quote_name(_column(pk))}"
    with cursor() as cur:
        cur.execute(sql, params)
        keys = [r[0] for r in cur.fetchall()] if auto else []
    # Both PostgreSQL and SQLite return the rows of a multi-row VALUES in order.
    for obj, key in zip(objs, keys, strict=False):
        setattr(obj, pk.attname, key)
    for obj in [*objs, *along]:
        obj._state.adding = False
        obj._state.db = connection.alias


def _by_model(rows: Sequence[models.Model]) -> list[tuple[type[models.Model], list[models.Model]]]:
    groups: dict[type[models.Model], list[models.Model]] = {}
    for row in rows:
        groups.setdefault(type(row), []).append(row)
    return list(groups.items())


def _rows(model: type[models.Model], objs: Sequence[models.Model]) -> tuple[str, list[Any]]:
    """The INSERT of `objs` and its parameters. On PostgreSQL a model whose columns JSON
    carries exactly goes as one JSON array of rows: the statement's text is the same for any
    number of rows (prepared once), and one parameter costs psycopg far less to convert than
    a dozen a row (docs/performance.md, "One parameter for the audit rows")."""
    if connection.vendor == "postgresql" and _json_safe(model):
        return _json_insert(model), [_json_param(model, objs)]
    return _values(model, len(objs)), _params(model, objs)


# Fields whose value JSON carries to the column unchanged (a foreign key when its target
# is one). Floats are left out (JSON has no NaN), as are bytes and anything with its own
# encoder.
_JSON_SAFE = (
    models.UUIDField,
    models.DateTimeField,
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.BooleanField,
)


@cache
def _json_safe(model: type[models.Model]) -> bool:
    def safe(f: models.Field[Any, Any]) -> bool:
        if isinstance(f, models.JSONField):
            return f.encoder is None and f.decoder is None
        if isinstance(f, models.ForeignKey):
            return safe(f.target_field)
        return isinstance(f, _JSON_SAFE)

    return all(safe(f) for f in _insert_fields(model))


@cache
def _json_insert(model: type[models.Model]) -> str:
    qn = connection.ops.quote_name
    table = model._meta.db_table
    columns = ", ".join(qn(_column(f)) for f in _insert_fields(model))
    return (
        f"INSERT INTO {table} ({columns}) SELECT {columns} "  # noqa: S608
        f"FROM jsonb_populate_recordset(NULL::{qn(table)}, %s::jsonb)"
    )


def _json_param(model: type[models.Model], objs: Sequence[models.Model]) -> str:
    fields = _insert_fields(model)
    rows = [{_column(f): f.pre_save(obj, add=True) for f in fields} for obj in objs]
    return json.dumps(rows, default=_json_value, allow_nan=False, separators=(",", ":"))


def _json_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not carried as JSON")


def _values(model: type[models.Model], count: int) -> str:
    row = "(" + ", ".join(["%s"] * len(_insert_fields(model))) + ")"
    return _insert_statement(model) + ", ".join([row] * count)


def _params(model: type[models.Model], objs: Sequence[models.Model]) -> list[Any]:
    fields = _insert_fields(model)
    return [
        f.get_db_prep_save(f.pre_save(obj, add=True), connection) for obj in objs for f in fields
    ]


@cache
def _insert_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    return tuple(
        f
        for f in model._meta.concrete_fields
        if not (f.primary_key and isinstance(f, models.AutoField | models.BigAutoField))
    )


@cache
def _insert_statement(model: type[models.Model]) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(_column(f)) for f in _insert_fields(model))
    return f"INSERT INTO {model._meta.db_table} ({columns}) VALUES "  # noqa: S608
