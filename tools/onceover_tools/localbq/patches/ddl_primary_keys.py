"""``ddl_primary_keys``: DDL declares a table's primary key, as BigQuery's DDL does.

BigQuery's DDL declares NOT ENFORCED primary keys in ``CREATE TABLE`` (a table constraint
``PRIMARY KEY (column[, ...]) NOT ENFORCED`` or a column's ``PRIMARY KEY NOT ENFORCED``:
"CREATE TABLE employees (id INT64 PRIMARY KEY NOT ENFORCED, name STRING)", the
change-data-capture page) and adds or drops one with ``ALTER TABLE ... ADD PRIMARY KEY
(column[, ...]) NOT ENFORCED`` / ``ALTER TABLE ... DROP PRIMARY KEY``; ``tables.get``
then answers it in ``tableConstraints.primaryKey``. Change data capture needs one ("You
must declare primary keys for the destination table").

bqemulator 1.4.0 hands the statements to DuckDB, whose parser refuses ``NOT ENFORCED``
(measured on 2026-12-03: all three forms fail the job with "Parser Error: syntax error at
or near "ENFORCED"" and no table is created). The patch reads the key out of a
single-statement ``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] <table> (...)``, runs the
statement without it (so the table is made with its columns, as before) and keeps the key
in ``primary_keys``' store; a ``CREATE TABLE`` without a key forgets the key a table of
that name had. ``ALTER TABLE <table> ADD PRIMARY KEY (...) NOT ENFORCED`` is answered by
the patch itself: the table must exist (404 notFound), name only its own columns and have
no key yet (400 invalidQuery, this launcher's wording); ``DROP PRIMARY KEY`` forgets it.
Tables are named ``dataset.table`` or ``project.dataset.table`` (backquoted or not), as
bqemulator needs them. Not read: keys in multi-statement scripts, ``CONSTRAINT name``
before a key, foreign keys.

Pinned by ``tests/localbq/test_cdc_patch.py``:
``test_a_primary_key_declared_by_ddl_is_kept_and_answered``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceover_tools.localbq.patches import primary_keys
from onceover_tools.localbq.patches.wrapping import wrap

_REF = r"(?P<ref>(?:`[^`]+`|[A-Za-z0-9_-]+)(?:\.(?:`[^`]+`|[A-Za-z0-9_-]+))*)"
_CREATE = re.compile(
    r"^\s*CREATE\s+(?P<replace>OR\s+REPLACE\s+)?TABLE\s+(?P<if_absent>IF\s+NOT\s+EXISTS\s+)?"
    + _REF,
    re.IGNORECASE,
)
_ALTER = re.compile(
    r"^\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?" + _REF + r"\s+(?:"
    r"ADD\s+PRIMARY\s+KEY\s*\((?P<columns>[^()]*)\)\s*NOT\s+ENFORCED"
    r"|(?P<drop>DROP\s+PRIMARY\s+KEY(?:\s+IF\s+EXISTS)?))\s*;?\s*$",
    re.IGNORECASE,
)
_TABLE_KEY = re.compile(
    r"^PRIMARY\s+KEY\s*\((?P<columns>[^()]*)\)\s*NOT\s+ENFORCED$", re.IGNORECASE
)
_COLUMN_KEY = re.compile(r"\s+PRIMARY\s+KEY\s+NOT\s+ENFORCED\b", re.IGNORECASE)
_OPENING, _CLOSING = "(<", ")>"


@dataclass(frozen=True)
class CreateTable:
    """A ``CREATE TABLE`` as read: its table, its key, and the statement without it."""

    table: tuple[str, str, str]
    key: tuple[str, ...] | None
    sql: str
    if_absent: bool


def _table(ref: str, project: str) -> tuple[str, str, str] | None:
    parts = [p for p in ref.replace("`", "").split(".") if p]
    if len(parts) == 2:  # dataset.table
        return project, parts[0], parts[1]
    if len(parts) == 3:  # project.dataset.table
        return parts[0], parts[1], parts[2]
    return None


def _columns(text: str) -> tuple[str, ...]:
    return tuple(c.strip().strip("`").strip() for c in text.split(",") if c.strip())


def _closing(sql: str, opening: int) -> int | None:
    """The index of the bracket closing the one at ``opening``, quotes and nesting
    (parentheses, ``STRUCT<...>``) skipped; None when it is never closed."""
    depth, quote = 0, ""
    for index in range(opening, len(sql)):
        char = sql[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
            if depth == 0:
                return index
    return None


def _elements(body: str) -> list[str]:
    """The column list's elements: ``body`` split at its top-level commas."""
    elements, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(body):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
        elif char == "," and depth == 0:
            elements.append(body[start:index])
            start = index + 1
    elements.append(body[start:])
    return elements


def read_create(sql: str, project: str) -> CreateTable | None:
    """The table and primary key of a single ``CREATE TABLE`` statement, with the
    statement as DuckDB takes it (the key left out); None for any other statement."""
    found = _CREATE.match(sql)
    table = _table(found["ref"], project) if found else None
    if found is None or table is None:
        return None
    if_absent = bool(found["if_absent"])
    opening = found.end()
    while opening < len(sql) and sql[opening].isspace():
        opening += 1
    closing = _closing(sql, opening) if sql[opening : opening + 1] == "(" else None
    if closing is None:  # CREATE TABLE ... AS SELECT, LIKE, COPY, CLONE: no column list
        return CreateTable(table, None, sql, if_absent)
    key: tuple[str, ...] | None = None
    kept: list[str] = []
    for element in _elements(sql[opening + 1 : closing]):
        table_key = _TABLE_KEY.match(element.strip())
        if table_key is not None:
            key = _columns(table_key["columns"])
            continue
        if _COLUMN_KEY.search(element):
            key = key or _columns(element.split(maxsplit=1)[0])
        kept.append(_COLUMN_KEY.sub("", element))
    rewritten = f"{sql[: opening + 1]}{','.join(kept)}{sql[closing:]}"
    return CreateTable(table, key, rewritten if key else sql, if_absent)


def apply() -> None:
    """Keep the primary key of ``CREATE TABLE``; answer ``ALTER TABLE ... ADD / DROP
    PRIMARY KEY``."""
    from bqemulator.api.routes import jobs
    from bqemulator.domain.errors import InvalidQueryError, ResourceRef, resource_not_found
    from bqemulator.jobs import executor

    def altered(sql: str, project_id: str, job_id: str, ctx: Any) -> Any:
        found = _ALTER.match(sql)
        table = _table(found["ref"], project_id) if found else None
        if found is None or table is None:
            return None
        meta = ctx.catalog.get_table(*table)
        if meta is None:
            raise resource_not_found(ResourceRef("table", *table))
        if found["drop"]:
            primary_keys.set_key(*table, None)
        else:
            columns = _columns(found["columns"])
            names = {f.name.casefold(): f.name for f in meta.schema_.fields}
            missing = [c for c in columns if c.casefold() not in names]
            if missing:
                raise InvalidQueryError(
                    f"Column {missing[0]} of the primary key is not in table {'.'.join(table)}"
                )
            if primary_keys.key_of(*table) is not None:
                raise InvalidQueryError(f"Table {'.'.join(table)} already has a primary key")
            primary_keys.set_key(*table, tuple(names[c.casefold()] for c in columns))
        now = ctx.clock.now()
        return executor._build_ddl_job_meta(
            project_id=project_id, job_id=job_id, bq_sql=sql, statement_type="ALTER_TABLE",
            arrow_table=executor._EMPTY_ARROW, now=now, ctx=ctx,
        )  # fmt: skip

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        async def execute_query_job(
            project_id: str, job_id: str, bq_sql: str, query_params: Any, ctx: Any,
            *args: Any, **kwargs: Any,
        ) -> Any:  # fmt: skip
            answered = altered(bq_sql, project_id, job_id, ctx)
            if answered is not None:
                return answered
            create = read_create(bq_sql, project_id)
            if create is None:
                return await original(project_id, job_id, bq_sql, query_params, ctx, *args,
                                      **kwargs)  # fmt: skip
            existed = ctx.catalog.get_table(*create.table) is not None
            job = await original(project_id, job_id, create.sql, query_params, ctx, *args,
                                 **kwargs)  # fmt: skip
            if not (create.if_absent and existed):  # IF NOT EXISTS of a table there: as it was
                primary_keys.set_key(*create.table, create.key)
            if create.sql is not bq_sql:  # the job answers the statement as it was sent
                configuration = dict(job.configuration)
                configuration["query"] = {**configuration.get("query", {}), "query": bq_sql}
                job = job.model_copy(update={"configuration": configuration})
            return job

        return execute_query_job

    # The jobs routes call the name they imported, looked up in their module at each call.
    wrap(jobs, "execute_query_job", make)
