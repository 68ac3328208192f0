"""What BigQuery holds, counted in BigQuery: the aggregate queries behind reconciliation.

Every query here is an aggregate (counts, distinct counts, grouped counts, at most
``SAMPLE_LIMIT`` sample keys); no row of the table ever comes back to the backend, so
a check of a billion-row table costs one scan, not a download. User values (the run id)
are query parameters; the table and column names, which cannot be, are checked against
:mod:`onceover.identifiers` before they are put between backticks.

A *scope* is a whole table, for a stamped run the rows whose ``_onceover_run_id`` is
the run's, or for an overwrite the rows of the partitions it replaced (by BigQuery's
partition ids, :mod:`onceover.partitions`). Duplicates are always looked for in the whole table:
a key of the run's that someone inserted again by hand is a duplicate the data's owner
pays for, whoever wrote the copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import requests
from google.api_core import exceptions as google_errors
from google.api_core.retry import Retry
from google.cloud import bigquery

from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE
from onceover.partitions import NULL_PARTITION, partitioning_of
from onceover.stamp import BATCH_ID_COLUMN, RUN_ID_COLUMN, missing_stamp_columns
from onceover_backend.errors import ReconciliationFailedError

SAMPLE_LIMIT = 20
"""Duplicate keys listed with their counts (the rest are only counted)."""
DEAD_LETTER_RUN_COLUMN = "run_id"
"""The column of a dead-letter table naming the run that set a row aside (the sink
creates the table: run_id, query_id, batch_id, write, table, partition, offset, key,
column, reason, row, set_aside_at; docs/guides/bad-rows.md#the-dead-letter-table)."""
DEAD_LETTER_TABLE_COLUMN = "table"
"""The column naming the table the row was refused for (one dead-letter table may serve
several); a dead-letter table without it is counted by run only."""


@dataclass(frozen=True)
class Scope:
    table: str
    """``project.dataset.table``."""
    key: str | None
    """The column identifying a row; None counts rows only."""
    run_id: str | None = None
    """Count only this run's rows (by its stamp); None counts the whole table."""
    group_by: str | None = None
    """A stamp column to break the counts down by (``_onceover_batch_id`` for a run's
    batches, ``_onceover_run_id`` for a table's runs)."""
    partitions: tuple[str, ...] | None = None
    """Count only the rows of these partitions (their ids); None counts every partition."""
    partition_id: str | None = None
    """With ``partitions``: the SQL naming a row's partition id, from the table's own
    partitioning (:meth:`TableCounter.in_partitions`)."""

    def __post_init__(self) -> None:
        if not TABLE_ID_RE.match(self.table):
            raise ValueError(f"{self.table!r} is not project.dataset.table")
        if self.key is not None and not COLUMN_NAME_RE.match(self.key):
            raise ValueError(f"{self.key!r} is not a column name")
        if self.group_by not in (None, BATCH_ID_COLUMN, RUN_ID_COLUMN):
            raise ValueError(f"cannot group by {self.group_by!r}")


@dataclass(frozen=True)
class KeyCopies:
    key: str
    """The key as text (an INT64 past 2**53 would lose digits as a JSON number)."""
    count: int
    group: Any = None
    """The batch (or run) of the scope that holds the key, when grouped."""


@dataclass(frozen=True)
class GroupCounts:
    group: Any
    rows: int = 0
    distinct_keys: int | None = None
    duplicate_keys: int = 0
    duplicate_rows: int = 0


@dataclass(frozen=True)
class Counts:
    rows: int
    distinct_keys: int | None
    rows_without_key: int | None
    duplicate_keys: int
    """Keys of the scope present more than once in the table."""
    duplicate_rows: int
    """Copies of those keys beyond the first."""
    samples: list[KeyCopies]
    groups: dict[Any, GroupCounts] = field(default_factory=dict)


class TableCounter:
    """Runs the aggregate queries of one check, each call bounded by ``timeout_s``.

    Connection errors are retried within the deadline, then reported: a check against
    an unreachable BigQuery ends as an ``error`` result, it does not hang the caller.
    Every call names its retry: the library's defaults retry for ten minutes (a query's
    ``job_retry`` even past a ``timeout`` given to it), which held a check's thread long
    after its deadline.
    """

    def __init__(self, client: bigquery.Client, timeout_s: float) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self._retry = Retry(timeout=timeout_s)
        self.queries = 0
        """Queries run so far (a check reports how many it took)."""
        self._tables: dict[str, bigquery.Table] = {}

    def columns(self, table: str) -> dict[str, str]:
        """Top-level column name -> BigQuery type; a missing table is a failed check."""
        return {f.name: f.field_type for f in self.table(table).schema}

    def in_partitions(self, scope: Scope) -> Scope:
        """``scope`` (of some partitions) with the SQL naming a row's partition, from its
        table's partitioning as it is now; a table no longer partitioned so fails the check."""
        try:
            partitioning = partitioning_of(self.table(scope.table))
        except ValueError as exc:
            raise ReconciliationFailedError(f"table {scope.table}: {exc}") from None
        if partitioning is None or not COLUMN_NAME_RE.match(partitioning.column):
            raise ReconciliationFailedError(
                f"table {scope.table} is no longer partitioned by a column, so the partitions "
                "the overwrite replaced cannot be counted"
            )
        column = f"`{partitioning.column}`"
        return replace(scope, partition_id=partitioning.partition_id.format(c=column))

    def table(self, table: str) -> bigquery.Table:
        if table in self._tables:
            return self._tables[table]
        try:
            found = self.client.get_table(table, retry=self._retry, timeout=self.timeout_s)
        except google_errors.NotFound:
            raise ReconciliationFailedError(
                f"table {table} does not exist (was it deleted?)"
            ) from None
        except (google_errors.GoogleAPIError, OSError) as exc:
            raise _unreachable(exc, self.timeout_s) from exc
        self._tables[table] = found
        return found

    def check_scope(self, scope: Scope, columns: dict[str, str]) -> None:
        """Fail the check, naming the column, when the table cannot answer for ``scope``."""
        names = {name.casefold() for name in columns}
        if scope.key is not None and scope.key.casefold() not in names:
            raise ReconciliationFailedError(
                f"key column {scope.key!r} is not in table {scope.table} "
                f"(its columns: {', '.join(columns)})"
            )
        if (scope.run_id is not None or scope.group_by is not None) and (
            missing := missing_stamp_columns(columns)
        ):
            raise ReconciliationFailedError(
                f"table {scope.table} lacks {' and '.join(missing)}, which the run's stamped "
                "rows need; were the columns dropped?"
            )

    def count(self, scope: Scope) -> Counts:
        where, params = _where(scope)
        totals = self.one(_totals_sql(scope, where), params)
        duplicates = self._rows(_duplicates_sql(scope, where), params) if scope.key else []
        per_group = self._rows(_groups_sql(scope, where), params) if scope.group_by else []
        duplicate_groups = (
            self._rows(_duplicate_groups_sql(scope, where), params)
            if scope.key and scope.group_by
            else []
        )
        groups: dict[Any, dict[str, Any]] = {}
        for row in per_group:
            groups[row["grp"]] = {
                "rows": row["total_rows"],
                "distinct_keys": row.get("distinct_keys"),
            }
        for row in duplicate_groups:
            groups.setdefault(row["grp"], {"rows": 0, "distinct_keys": 0 if scope.key else None})
            groups[row["grp"]]["duplicate_keys"] = row["keys"]
            groups[row["grp"]]["duplicate_rows"] = row["extra"]
        first = duplicates[0] if duplicates else {}
        return Counts(
            rows=totals["total_rows"],
            distinct_keys=totals.get("distinct_keys"),
            rows_without_key=totals.get("rows_without_key"),
            duplicate_keys=int(first.get("keys") or 0),
            duplicate_rows=int(first.get("extra") or 0),
            samples=[
                KeyCopies(str(row["key"]), int(row["copies"]), row.get("grp")) for row in duplicates
            ],
            groups={g: GroupCounts(g, **values) for g, values in groups.items()},
        )

    def count_dead_letters(self, table: str, run_ids: list[str], target: str) -> tuple[int, bool]:
        """Rows of ``run_ids`` refused for ``target`` in the dead-letter table ``table`` (one
        aggregate query), and whether they could be told apart by target: a table without
        a ``table`` column is counted by run only."""
        if not TABLE_ID_RE.match(table):
            raise ValueError(f"{table!r} is not project.dataset.table")
        columns = {name.casefold() for name in self.columns(table)}
        if DEAD_LETTER_RUN_COLUMN not in columns:
            raise ReconciliationFailedError(
                f"dead-letter table {table} has no {DEAD_LETTER_RUN_COLUMN} column: is it a "
                "dead-letter table the sink created?"
            )
        column = f"`{DEAD_LETTER_RUN_COLUMN}`"
        params: list[Any]
        if len(run_ids) == 1:
            where = f"{column} = @run_id"
            params = [bigquery.ScalarQueryParameter("run_id", "STRING", run_ids[0])]
        else:
            where = f"{column} IN UNNEST(@run_ids)"
            params = [bigquery.ArrayQueryParameter("run_ids", "STRING", run_ids)]
        by_table = DEAD_LETTER_TABLE_COLUMN in columns
        if by_table:
            where += f" AND `{DEAD_LETTER_TABLE_COLUMN}` = @target"
            params.append(bigquery.ScalarQueryParameter("target", "STRING", target))
        sql = f"SELECT COUNT(*) AS total_rows FROM `{table}` WHERE {where}"
        return int(self.one(sql, params)["total_rows"]), by_table

    def rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """The rows of one query (an aggregate: nothing here reads a table's rows back)."""
        return self._rows(sql, params)

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        config = bigquery.QueryJobConfig(query_parameters=params, use_query_cache=False)
        self.queries += 1
        try:
            job = self.client.query(
                sql, job_config=config, retry=self._retry, timeout=self.timeout_s,
                job_retry=None,  # a failed query is the check's error; no ten-minute retry
            )  # fmt: skip
            return [
                dict(row.items()) for row in job.result(timeout=self.timeout_s, retry=self._retry)
            ]
        except google_errors.NotFound as exc:
            raise ReconciliationFailedError(
                f"BigQuery no longer finds the table: {exc.message}"
            ) from None
        except google_errors.BadRequest as exc:
            raise ReconciliationFailedError(
                f"BigQuery refused the check's query: {exc.message}"
            ) from None
        except (google_errors.GoogleAPIError, OSError, TimeoutError) as exc:
            raise _unreachable(exc, self.timeout_s) from exc

    def one(self, sql: str, params: list[Any]) -> dict[str, Any]:
        rows = self._rows(sql, params)
        if len(rows) != 1:
            raise ReconciliationFailedError(f"an aggregate query returned {len(rows)} rows, not 1")
        return rows[0]


def _unreachable(exc: BaseException, timeout_s: float) -> ReconciliationFailedError:
    text = str(exc).splitlines()[0] if str(exc) else ""
    # Retries end at the deadline (RetryError); a call's own wait ends in a Timeout.
    timed_out = isinstance(
        exc,
        TimeoutError | requests.Timeout | google_errors.RetryError | google_errors.DeadlineExceeded,
    )
    within = f" within {timeout_s:g} s" if timed_out else ""
    return ReconciliationFailedError(
        f"BigQuery did not answer{within}: {type(exc).__name__}: {text}"
    )


def _where(scope: Scope) -> tuple[str, list[Any]]:
    if scope.partitions is not None:
        if scope.partition_id is None:
            raise ValueError("a scope of partitions needs its table's partition_id")
        return f"COALESCE({scope.partition_id}, '{NULL_PARTITION}') IN UNNEST(@partitions)", [
            bigquery.ArrayQueryParameter("partitions", "STRING", list(scope.partitions))
        ]
    if scope.run_id is None:
        return "TRUE", []
    return f"`{RUN_ID_COLUMN}` = @run_id", [
        bigquery.ScalarQueryParameter("run_id", "STRING", scope.run_id)
    ]


def _totals_sql(scope: Scope, where: str) -> str:
    key = f"`{scope.key}`"
    measures = "COUNT(*) AS total_rows"
    if scope.key:
        measures += (
            f", COUNT(DISTINCT {key}) AS distinct_keys, COUNTIF({key} IS NULL) AS rows_without_key"
        )
    return f"SELECT {measures} FROM `{scope.table}` WHERE {where}"


def _copies_cte(scope: Scope, where: str) -> str:
    """``copies``: each key of the scope found more than once in the whole table, with its
    count and (grouped) the batch or run of the scope holding it."""
    key = f"`{scope.key}`"
    group = f"MIN(`{scope.group_by}`)" if scope.group_by else "CAST(NULL AS STRING)"
    return (
        f"WITH scope_keys AS (SELECT {key} AS k, {group} AS grp FROM `{scope.table}` "
        f"WHERE {where} AND {key} IS NOT NULL GROUP BY {key}), "
        f"copies AS (SELECT s.k, s.grp, COUNT(*) AS copies FROM `{scope.table}` AS t "
        f"JOIN scope_keys AS s ON t.{key} = s.k GROUP BY s.k, s.grp HAVING COUNT(*) > 1) "
    )


def _duplicates_sql(scope: Scope, where: str) -> str:
    return (
        _copies_cte(scope, where)
        + "SELECT CAST(k AS STRING) AS key, grp, copies, COUNT(*) OVER () AS keys, "
        "SUM(copies - 1) OVER () AS extra FROM copies "
        f"ORDER BY copies DESC, key LIMIT {SAMPLE_LIMIT}"
    )


def _duplicate_groups_sql(scope: Scope, where: str) -> str:
    return (
        _copies_cte(scope, where)
        + "SELECT grp, COUNT(*) AS keys, SUM(copies - 1) AS extra FROM copies GROUP BY grp"
    )


def _groups_sql(scope: Scope, where: str) -> str:
    measures = "COUNT(*) AS total_rows"
    if scope.key:
        measures += f", COUNT(DISTINCT `{scope.key}`) AS distinct_keys"
    return (
        f"SELECT `{scope.group_by}` AS grp, {measures} FROM `{scope.table}` "
        f"WHERE {where} GROUP BY grp"
    )
