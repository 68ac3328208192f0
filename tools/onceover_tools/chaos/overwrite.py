"""The overwrite workloads' table: old rows before the run, and what must be left after.

Before the job runs, the table holds :data:`OLD_ROWS` rows whose keys no source row has:
half on the day the source's rows fall in (2026-01-01, ``onceover_jobs.generate``), half on
the day before. ``overwrite`` replaces the whole table, so after it the table must hold
the source's keys once each and no old key; ``overwrite_dynamic`` (a table partitioned
by day) replaces only the source's day, so the old rows of the day before must still be
there, each once, and none of the source's day. And no staging table may be left in the
dataset once the swap is recorded (``_onceover_staging_*``).

Written with DML, not the legacy streaming insert: real BigQuery refuses to DELETE rows
still in a streaming buffer, which is what the swap does to them.
"""

from __future__ import annotations

from google.cloud import bigquery

OLD_START = 1_000_000
OLD_ROWS = 60
"""Old rows seeded: keys ``OLD_START ..``; the first half on the source's day."""
REPLACED_DAY = "2026-01-01"
KEPT_DAY = "2025-12-31"
STAGING_PREFIX = "_onceover_staging_"


def old_keys(*, dynamic: bool) -> tuple[range, range]:
    """The old keys the run must remove, and those it must keep."""
    half = OLD_START + OLD_ROWS // 2
    replaced = range(OLD_START, half)
    kept = range(half, OLD_START + OLD_ROWS)
    if dynamic:
        return replaced, kept
    return range(OLD_START, OLD_START + OLD_ROWS), range(0)


def create_seeded(
    client: bigquery.Client, table: str, schema: list[bigquery.SchemaField], *, dynamic: bool
) -> None:
    """The table (by day of ``event_time`` when ``dynamic``) with its old rows."""
    created = bigquery.Table(table, schema=schema)
    if dynamic:
        created.time_partitioning = bigquery.TimePartitioning(
            type_=bigquery.TimePartitioningType.DAY, field="event_time"
        )
    client.create_table(created)
    half = OLD_START + OLD_ROWS // 2
    values = ", ".join(
        f"({key}, 'old-{key}', 1, 1.0, 'EUR', "
        f"TIMESTAMP '{REPLACED_DAY if key < half else KEPT_DAY} 12:00:00+00')"
        for key in range(OLD_START, OLD_START + OLD_ROWS)
    )
    client.query_and_wait(
        f"INSERT INTO `{table}` (event_id, order_id, customer_id, amount, currency, "
        f"event_time) VALUES {values}"
    )


def staging_problems(client: bigquery.Client, table: str) -> list[str]:
    """A staging table the overwrite of ``table`` left behind."""
    dataset = table.rsplit(".", 1)[0]
    name = table.rsplit(".", 1)[1]
    left = sorted(
        t.table_id
        for t in client.list_tables(dataset)
        if t.table_id.startswith(f"{STAGING_PREFIX}{name}_")
    )
    return [f"staging tables left in {dataset} after the swap: {', '.join(left)}"] if left else []
