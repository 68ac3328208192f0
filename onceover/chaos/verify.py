"""The verdict on one chaos run, from BigQuery and the control plane, never the job's word.

BigQuery must hold exactly the source's keys, each once: ``COUNT(*)`` and
``COUNT(DISTINCT key)`` equal the source's row count, and the key *set* equals the
source's, compared by aggregates so nothing is downloaded: per bucket
(``MOD(key, 64)``) the count, the sum and the sum of squares of the keys. A lost key
paired with a duplicated one keeps ``COUNT(*)`` but not the distinct count; a lost key
paired with a foreign one keeps both counts but not the bucket sums.

A user-code workload's summary table must hold each group once, its orders adding up
to the source's rows.

The control plane must say the run ``succeeded`` with ``rows_committed`` equal to the
source's rows. Its events may arrive a little after the job exits (spooled during an
outage), so it is asked until it agrees or a deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.cloud import bigquery

from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE

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
    per_bucket = client.query(
        f"SELECT MOD(`{key}`, @buckets) AS b, COUNT(*) AS n, SUM(`{key}`) AS s, "
        f"SUM(`{key}` * `{key}`) AS q FROM `{table}` GROUP BY b",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[bigquery.ScalarQueryParameter("buckets", "INT64", BUCKETS)]
        ),
    ).result()
    buckets = {int(r["b"]): Bucket(int(r["n"]), int(r["s"]), int(r["q"])) for r in per_bucket}
    return KeyAggregate(int(totals["n"]), int(totals["d"]), buckets)


def compare_keys(expected: KeyAggregate, actual: KeyAggregate) -> list[str]:
    """Every way ``actual`` differs from ``expected``, in words; empty when equal."""
    problems = []
    if actual.rows != expected.rows:
        problems.append(f"BigQuery holds {actual.rows:,} rows, expected {expected.rows:,}")
    if actual.distinct != expected.distinct:
        problems.append(
            f"BigQuery holds {actual.distinct:,} distinct keys, expected {expected.distinct:,}"
        )
    wrong = sorted(
        b
        for b in set(expected.buckets) | set(actual.buckets)
        if expected.buckets.get(b) != actual.buckets.get(b)
    )
    if wrong:
        shown = ", ".join(
            f"{b} (count {_count(actual.buckets.get(b))}, "
            f"expected {_count(expected.buckets.get(b))})"
            for b in wrong[:5]
        )
        problems.append(
            f"the key set differs from the source's in {len(wrong)} of {BUCKETS} buckets "
            f"(key mod {BUCKETS}): {shown}"
        )
    return problems


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


def _one_row(client: bigquery.Client, table: str, column: str, select: str) -> Any:
    """``SELECT <select> FROM table`` (``{column}`` filled in), both names checked first:
    they go into the query's text."""
    if not TABLE_ID_RE.match(table):
        raise ValueError(f"{table!r} is not project.dataset.table")
    if not COLUMN_NAME_RE.match(column):
        raise ValueError(f"{column!r} is not a column name")
    query = f"SELECT {select.format(column=column)} FROM `{table}`"
    return next(iter(client.query(query).result()))


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
    url: str, token: str, run_id: str, rows: int, deadline_s: float = CONTROL_PLANE_DEADLINE_S
) -> ControlPlaneView:
    """Ask ``GET /api/runs/{run_id}`` until it says succeeded with ``rows``, or time is up."""
    view = ControlPlaneView()
    deadline = time.monotonic() + deadline_s
    while True:
        body = _get_run(url, token, run_id)
        if body is not None:
            view.status = body.get("status")
            view.rows_committed = body.get("rows_committed")
            view.attempts = len(body.get("attempts", []))
            view.write_requests = dict(body.get("write_requests", {}))
            if view.status == "succeeded" and view.rows_committed == rows:
                return view
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if body is None:
        view.problems.append(f"control plane: run {run_id} not found")
    else:
        view.problems.append(
            f"control plane: run {run_id} is {view.status} with rows_committed "
            f"{view.rows_committed}, expected succeeded with {rows:,}"
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
