"""The verdict on one chaos run, from BigQuery and the control plane, never the job's word.

BigQuery must hold exactly the source's keys, each once: ``COUNT(*)`` and
``COUNT(DISTINCT key)`` equal the source's row count, and the key *set* equals the
source's, compared by aggregates so nothing is downloaded: per bucket
(``MOD(key, 64)``) the count, the sum and the sum of squares of the keys. A lost key
paired with a duplicated one keeps ``COUNT(*)`` but not the distinct count; a lost key
paired with a foreign one keeps both counts but not the bucket sums.

A user-code workload's summary table must hold each group once, its orders adding up
to the source's rows.

``bad_rows``: the source's bad rows (those BigQuery refuses) are not among the keys
the table must hold, and none of them is in it; the dead-letter table must hold, for
the run and the table (``run_id``, ``table``), exactly the bad keys, each once (the
same aggregates over its ``key`` column, cast to an integer), each naming the column
at fault, and nothing of any other run or table.

The ledger must be where the schedule's store puts it (:mod:`onceover_tools.chaos.stores`),
so the schedule tested what it names: read there (:mod:`onceover.ledger_files`, a path or
a bucket's URL alike), it holds the table's writes committed, their rows adding up to the
rows BigQuery must hold; a ledger in a bucket leaves none of its records on this disk.

The control plane must say the run ``succeeded`` with ``rows_committed`` equal to the
source's rows. Its events may arrive a little after the job exits (spooled during an
outage), so it is asked until it agrees or a deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.cloud import bigquery

from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE
from onceover.ledger_files import safe_name, scope_records, scope_summaries, scopes
from onceover.ledger_store import join

BUCKETS = 64
CONTROL_PLANE_DEADLINE_S = 30.0


@dataclass(frozen=True)
class Bucket:
    count: int
    total: int
    squares: int


@dataclass(frozen=True)
class KeyAggregate:
    """What a set (or bag) of integer keys looks like from a distance."""

    rows: int
    distinct: int
    buckets: dict[int, Bucket]

    @classmethod
    def of(cls, keys: Iterable[int]) -> KeyAggregate:
        counts: dict[int, list[int]] = {}
        rows = 0
        seen: set[int] = set()
        for key in keys:
            rows += 1
            seen.add(key)
            bucket = counts.setdefault(key % BUCKETS, [0, 0, 0])
            bucket[0] += 1
            bucket[1] += key
            bucket[2] += key * key
        return cls(rows, len(seen), {b: Bucket(*v) for b, v in counts.items()})


def table_aggregate(client: bigquery.Client, table: str, key: str) -> KeyAggregate:
    """The aggregate of ``table``'s integer ``key`` column, computed in BigQuery."""
    totals = _one_row(client, table, key, "COUNT(*) AS n, COUNT(DISTINCT `{column}`) AS d")
    buckets = _buckets(client, f"SELECT `{key}` AS k FROM `{table}`", [])
    return KeyAggregate(int(totals["n"]), int(totals["d"]), buckets)


def _buckets(
    client: bigquery.Client, keys_sql: str, parameters: list[bigquery.ScalarQueryParameter]
) -> dict[int, Bucket]:
    """Per bucket the count, sum and sum of squares of the integer keys ``k`` that
    ``keys_sql`` selects (NULLs left out), computed in BigQuery."""
    per_bucket = client.query(
        "SELECT MOD(k, @buckets) AS b, COUNT(*) AS n, SUM(k) AS s, SUM(k * k) AS q "
        f"FROM ({keys_sql}) AS keys WHERE k IS NOT NULL GROUP BY b",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[
                bigquery.ScalarQueryParameter("buckets", "INT64", BUCKETS),
                *parameters,
            ]
        ),
    ).result()
    return {int(r["b"]): Bucket(int(r["n"]), int(r["s"]), int(r["q"])) for r in per_bucket}


def keys_present(
    client: bigquery.Client, table: str, key: str, keys: Sequence[int], limit: int = 5
) -> list[int]:
    """Which of ``keys`` ``table``'s integer ``key`` column holds (at most ``limit`` of
    them, smallest first), asked of BigQuery."""
    _check_names(table, key)
    if not keys:
        return []
    found = client.query(
        f"SELECT DISTINCT `{key}` AS k FROM `{table}` WHERE `{key}` IN UNNEST(@keys) "
        "ORDER BY k LIMIT @limit",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[
                bigquery.ArrayQueryParameter("keys", "INT64", list(keys)),
                bigquery.ScalarQueryParameter("limit", "INT64", limit),
            ]
        ),
    ).result()
    return [int(r["k"]) for r in found]


def bad_keys_problems(table: str, found: Sequence[int]) -> list[str]:
    """``found``: bad keys (rows BigQuery must refuse) that ``table`` holds all the same."""
    if not found:
        return []
    return [
        f"{table} holds rows BigQuery must refuse (their currency is too long): keys "
        + ", ".join(str(k) for k in found)
    ]


@dataclass(frozen=True)
class DeadLetterView:
    """A dead-letter table as BigQuery counts it, for one run and one target table."""

    exists: bool
    rows: int
    """Every row of the table, whatever its run or target."""
    ours: KeyAggregate
    """The run's rows for the target: their count, distinct ``key`` values, and the
    aggregates of the keys that are integers."""
    unkeyed: int = 0
    """Of the run's rows, those whose ``key`` is NULL or no integer."""
    elsewhere: int = 0
    """Of the run's rows, those naming another column than the one at fault, or none."""

    @classmethod
    def missing(cls) -> DeadLetterView:
        return cls(False, 0, KeyAggregate(0, 0, {}))


def dead_letter_view(
    client: bigquery.Client, table: str, *, run_id: str, target: str, column: str
) -> DeadLetterView:
    """Count ``table`` (a dead-letter table: onceover_jobs.sink.rows.dead_letter) in BigQuery: its
    rows, and those ``run_id`` set aside for ``target`` by key and by the column named."""
    from google.api_core.exceptions import NotFound

    _check_names(table, "key")
    ours = "run_id = @run AND `table` = @target"
    parameters = [
        bigquery.ScalarQueryParameter("run", "STRING", run_id),
        bigquery.ScalarQueryParameter("target", "STRING", target),
        bigquery.ScalarQueryParameter("column", "STRING", column),
    ]
    try:
        totals = next(
            iter(
                client.query(
                    f"SELECT COUNT(*) AS n, COUNTIF({ours}) AS ours, "
                    f"COUNT(DISTINCT IF({ours}, `key`, NULL)) AS d, "
                    f"COUNTIF({ours} AND SAFE_CAST(`key` AS INT64) IS NULL) AS unkeyed, "
                    f"COUNTIF({ours} AND (`column` IS NULL OR `column` != @column)) AS elsewhere "
                    f"FROM `{table}`",
                    job_config=bigquery.QueryJobConfig(query_parameters=parameters),
                ).result()
            )
        )
    except NotFound:
        return DeadLetterView.missing()
    buckets = _buckets(
        client,
        f"SELECT SAFE_CAST(`key` AS INT64) AS k FROM `{table}` WHERE {ours}",
        parameters[:2],
    )
    return DeadLetterView(
        exists=True,
        rows=int(totals["n"]),
        ours=KeyAggregate(int(totals["ours"]), int(totals["d"]), buckets),
        unkeyed=int(totals["unkeyed"]),
        elsewhere=int(totals["elsewhere"]),
    )


def dead_letter_problems(
    expected: KeyAggregate, view: DeadLetterView, *, table: str, column: str
) -> list[str]:
    """Every way the dead-letter table differs from holding exactly the ``expected``
    keys, each once, each naming ``column``, and nothing else; empty when it does."""
    if not view.exists:
        if expected.rows == 0:
            return []
        return [
            f"the dead-letter table {table} does not exist: the {expected.rows:,} rows "
            "BigQuery refused were set aside nowhere"
        ]
    problems = []
    if view.ours.rows != expected.rows:
        problems.append(
            f"the dead-letter table {table} holds {view.ours.rows:,} rows of the run, "
            f"expected {expected.rows:,} (the source's bad rows)"
        )
    if view.ours.distinct != expected.distinct:
        problems.append(
            f"the dead-letter table {table} holds {view.ours.distinct:,} distinct keys of "
            f"the run, expected {expected.distinct:,}"
        )
    wrong = _wrong_buckets(expected, view.ours)
    if wrong:
        problems.append(
            f"the dead-letter table's keys differ from the source's bad keys in {len(wrong)} "
            f"of {BUCKETS} buckets (key mod {BUCKETS}): {_shown(wrong, expected, view.ours)}"
        )
    if view.unkeyed:
        problems.append(
            f"{view.unkeyed:,} rows of the run in the dead-letter table {table} have no integer key"
        )
    if view.elsewhere:
        problems.append(
            f"{view.elsewhere:,} rows of the run in the dead-letter table {table} name "
            f"another column than {column}, or none"
        )
    if (others := view.rows - view.ours.rows) > 0:
        problems.append(
            f"the dead-letter table {table} holds {others:,} rows of another run or table"
        )
    return problems


def compare_keys(expected: KeyAggregate, actual: KeyAggregate) -> list[str]:
    """Every way ``actual`` differs from ``expected``, in words; empty when equal."""
    problems = []
    if actual.rows != expected.rows:
        problems.append(f"BigQuery holds {actual.rows:,} rows, expected {expected.rows:,}")
    if actual.distinct != expected.distinct:
        problems.append(
            f"BigQuery holds {actual.distinct:,} distinct keys, expected {expected.distinct:,}"
        )
    wrong = _wrong_buckets(expected, actual)
    if wrong:
        problems.append(
            f"the key set differs from the source's in {len(wrong)} of {BUCKETS} buckets "
            f"(key mod {BUCKETS}): {_shown(wrong, expected, actual)}"
        )
    return problems


def _wrong_buckets(expected: KeyAggregate, actual: KeyAggregate) -> list[int]:
    return sorted(
        b
        for b in set(expected.buckets) | set(actual.buckets)
        if expected.buckets.get(b) != actual.buckets.get(b)
    )


def _shown(wrong: Sequence[int], expected: KeyAggregate, actual: KeyAggregate) -> str:
    return ", ".join(
        f"{b} (count {_count(actual.buckets.get(b))}, expected {_count(expected.buckets.get(b))})"
        for b in wrong[:5]
    )


def summary_problems(client: bigquery.Client, table: str, group: str, rows: int) -> list[str]:
    """A summary table (one row per ``group``, its ``orders`` counted) holds each group
    once and the orders add up to the source's ``rows``; in words where it does not."""
    totals = _one_row(
        client, table, group, "COUNT(*) AS n, COUNT(DISTINCT `{column}`) AS d, SUM(orders) AS s"
    )
    n, d, s = int(totals["n"]), int(totals["d"]), int(totals["s"] or 0)
    problems = []
    if n != d:
        problems.append(f"the summary {table} holds {n} rows for {d} {group}s: some twice")
    if s != rows:
        problems.append(f"the summary {table} counts {s:,} orders, expected {rows:,}")
    return problems


@dataclass(frozen=True)
class LedgerView:
    """What a ledger holds committed for one table, over every scope (query, run) in it."""

    where: str
    scopes: int
    writes: int
    """Committed batches and writes (a record each), pruned ones included."""
    rows: int


def ledger_view(root: str, table: str) -> LedgerView:
    """Read the ledger at ``root`` (a path or a URL): the committed writes to ``table``
    and their rows, the pruned ones counted from their summaries (onceover.ledger_files)."""
    found = scopes(root)
    writes = rows = 0
    for scope in found:
        records = scope_records(root, scope)  # before the summaries, as ScopeTotals reads
        summaries = scope_summaries(root, scope)
        directory = join(safe_name(scope), safe_name(table))
        for key, summary in summaries.items():
            if key == directory or key.startswith(f"{directory}/"):
                writes, rows = writes + summary.batches, rows + summary.rows
        for record in records:
            if not record.committed or record.table != table:
                continue
            key = join(directory, "writes", safe_name(record.write)) if record.write else directory
            pruned = summaries.get(key)
            if pruned is None or not pruned.covers(record.batch_id):
                writes, rows = writes + 1, rows + record.expected_rows
    return LedgerView(root, len(found), writes, rows)


def ledger_problems(view: LedgerView, rows: int, *, not_at: str | None = None) -> list[str]:
    """What is wrong with where the ledger was: none at ``view.where``, or one whose
    committed rows are not ``rows``, or (``not_at``: where the job keeps it when told
    nothing) records on this disk where the schedule put them in a bucket."""
    problems = []
    if view.writes == 0:
        problems.append(f"the ledger at {view.where} holds no committed write")
    elif view.rows != rows:
        problems.append(
            f"the ledger at {view.where} holds {view.rows:,} rows committed, expected {rows:,}"
        )
    if not_at is not None and (stray := scopes(not_at)):
        problems.append(
            f"the ledger was written on this disk ({not_at}: {', '.join(stray)}), "
            f"not only at {view.where}"
        )
    return problems


def _one_row(client: bigquery.Client, table: str, column: str, select: str) -> Any:
    """``SELECT <select> FROM table`` (``{column}`` filled in), both names checked first:
    they go into the query's text."""
    _check_names(table, column)
    query = f"SELECT {select.format(column=column)} FROM `{table}`"
    return next(iter(client.query(query).result()))


def _check_names(table: str, column: str) -> None:
    """Names that go into a query's text: refused unless they are what they claim."""
    if not TABLE_ID_RE.match(table):
        raise ValueError(f"{table!r} is not project.dataset.table")
    if not COLUMN_NAME_RE.match(column):
        raise ValueError(f"{column!r} is not a column name")


def _count(bucket: Bucket | None) -> int:
    return bucket.count if bucket else 0


@dataclass
class ControlPlaneView:
    status: str | None = None
    rows_committed: int | None = None
    attempts: int | None = None
    write_requests: dict[str, int] = field(default_factory=dict)
    """Append requests by response code (``ALREADY_EXISTS`` shows deduplication at work)."""
    problems: list[str] = field(default_factory=list)


def control_plane_view(
    url: str,
    token: str,
    run_id: str,
    rows: int,
    deadline_s: float = CONTROL_PLANE_DEADLINE_S,
    *,
    status: str | None = "succeeded",
) -> ControlPlaneView:
    """Ask ``GET /api/runs/{run_id}`` until it says ``status`` (any, if None: a streaming
    query stopped cleanly stays ``running``) with ``rows``, or time is up."""
    view = ControlPlaneView()
    deadline = time.monotonic() + deadline_s
    while True:
        body = _get_run(url, token, run_id)
        if body is not None:
            view.status = body.get("status")
            view.rows_committed = body.get("rows_committed")
            view.attempts = len(body.get("attempts", []))
            view.write_requests = dict(body.get("write_requests", {}))
            if status in (None, view.status) and view.rows_committed == rows:
                return view
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if body is None:
        view.problems.append(f"control plane: run {run_id} not found")
    else:
        expected = f"{status} with {rows:,}" if status else f"{rows:,}"
        view.problems.append(
            f"control plane: run {run_id} is {view.status} with rows_committed "
            f"{view.rows_committed}, expected {expected}"
        )
    return view


def _get_run(url: str, token: str, run_id: str) -> Mapping[str, Any] | None:
    try:
        response = httpx.get(
            f"{url}/api/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
    except httpx.TransportError:
        return None
    if response.status_code != 200:
        return None
    body: Mapping[str, Any] = response.json()
    return body
