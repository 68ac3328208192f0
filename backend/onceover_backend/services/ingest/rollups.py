"""Append requests by minute and by hour, as one ingest adds them up: counted per
(run, minute, table, stream type, response code) while the events are applied, then
added to ``WriteRollup`` and ``HourRollup`` (and the runs' retry-code counts) at once."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql, sqlite

from onceover import events as ev
from onceover_backend.tables import HourRollup, Run, WriteRollup

RollupKey = tuple[str, datetime, str, str, str]  # run, minute, table, stream type, code


@dataclass
class Rollup:
    requests: int = 0
    rows: int = 0
    bytes: int = 0


Rollups = dict[RollupKey, Rollup]


def rollup_key(event: ev.StreamEvent, minute: datetime, code: str) -> RollupKey:
    return (event.run_id, minute, event.table, event.stream_type, code)


def count(rollups: Rollups, key: RollupKey, rows: int, size: int) -> None:
    """One append request, in its rollup."""
    rollup = rollups.get(key)
    if rollup is None:
        rollup = rollups[key] = Rollup()
    rollup.requests += 1
    rollup.rows += rows
    rollup.bytes += size


def count_retry_codes(runs: Mapping[str, Run], rollups: Rollups) -> None:
    """Add these ALREADY_EXISTS, OUT_OF_RANGE and RESOURCE_EXHAUSTED (the throughput
    quota's refusals) requests to their runs' counts."""
    for (run_id, _, _, _, code), counts in rollups.items():
        if code == "ALREADY_EXISTS":
            runs[run_id].already_exists_requests += counts.requests
        elif code == "OUT_OF_RANGE":
            runs[run_id].out_of_range_requests += counts.requests
        elif code == "RESOURCE_EXHAUSTED":
            runs[run_id].throttled_requests += counts.requests


def upsert(connection: Connection, rollups: Rollups) -> None:
    """Add ``rollups`` to the stored per-minute and per-hour rows."""
    if not rollups:
        return
    rows = [
        {"run_id": run_id, "minute": minute, "table_id": table_id,
         "stream_type": stream_type, "code": code, "requests": counts.requests,
         "rows": counts.rows, "bytes": counts.bytes}
        for (run_id, minute, table_id, stream_type, code), counts in sorted(
            rollups.items(), key=lambda item: item[0]
        )
    ]  # fmt: skip
    hours: dict[tuple[str, datetime, str, str], int] = defaultdict(int)
    for (run_id, minute, table_id, _, code), counts in rollups.items():
        hours[(run_id, minute.replace(minute=0), table_id, code)] += counts.requests
    hour_rows = [
        {"run_id": run_id, "hour": hour, "table_id": table_id, "code": code,
         "requests": requests}
        for (run_id, hour, table_id, code), requests in sorted(hours.items())
    ]  # fmt: skip
    # Rows in key order (a fixed lock order on PostgreSQL), each key once, as ON
    # CONFLICT requires. One statement executed for every row: a multi-row VALUES
    # is compiled anew for each row count (docs/journal/profiling.md). On the
    # session's connection: the ORM has nothing to add to a Core upsert, and nothing
    # to flush first (the projection has).
    dialect = connection.dialect.name
    connection.execute(_summing_upsert(dialect, WriteRollup), rows)
    connection.execute(_summing_upsert(dialect, HourRollup), hour_rows)


_SUMMED = {WriteRollup: ("requests", "rows", "bytes"), HourRollup: ("requests",)}
"""The counters of each rollup table; its other columns but the id are its key."""


@cache
def _summing_upsert(dialect: str, rollup: type[WriteRollup] | type[HourRollup]) -> Any:
    """A rollup table's upsert, adding each counter to the stored row of its key. Built
    once a dialect and table: building it (its ``excluded`` columns) and its cache key
    each batch cost a small batch's ingest dearly (docs/journal/profiling.md)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = rollup.__table__  # type: ignore[union-attr]
    counters = _SUMMED[rollup]
    base = insert(table)
    return base.on_conflict_do_update(
        index_elements=[c.name for c in table.columns if c.name != "id" and c.name not in counters],
        set_={name: table.c[name] + base.excluded[name] for name in counters},
    )
