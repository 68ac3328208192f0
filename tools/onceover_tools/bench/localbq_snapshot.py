"""How long a 10,000-row append takes on a 1,000,000-row table, with and without the
``no_snapshot_per_write`` patch of the local BigQuery.

    .venv/bin/python -m onceover_tools.bench.localbq_snapshot [--base-rows 1000000] [--repeats 5]

Each variant runs in a fresh child process (same data, same appends); the figures
are printed side by side with their ratio. The patch's own module
(``tools/onceover_tools/localbq/patches/no_snapshot_per_write.py``) points here for them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

APPEND_ROWS = 10_000
LOAD_CHUNK_ROWS = 100_000


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rows(start: int, count: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table({
        "id": ids,
        "name": pa.array([f"row-{i}" for i in range(start, start + count)]),
        "amount": pa.compute.divide(pa.compute.cast(ids, pa.float64()), 100.0),
    })  # fmt: skip


def measure(variant: str, base_rows: int, repeats: int) -> dict[str, float]:
    """Run in the child: load ``base_rows``, then time ``repeats`` appends of 10k rows."""
    from google.cloud import bigquery
    from google.cloud.bigquery_storage_v1 import types

    from onceover.bigquery import bigquery_client, write_client
    from onceover_tools.localbq import LocalBigQuery, patches

    patches.install()
    if variant == "before":
        from bqemulator.versioning.snapshots import SnapshotManager

        SnapshotManager.record_change = SnapshotManager.record_change.__wrapped__  # type: ignore[attr-defined,method-assign]
    rss_start = _rss_mb()
    with LocalBigQuery() as bq:
        rest, write = bigquery_client(bq.config), write_client(bq.config)
        rest.create_dataset("bench")
        table_id = f"{bq.config.project}.bench.t"
        rest.create_table(bigquery.Table(table_id, schema=[
            bigquery.SchemaField("id", "INT64"),
            bigquery.SchemaField("name", "STRING"),
            bigquery.SchemaField("amount", "FLOAT64"),
        ]))  # fmt: skip
        parent = write.table_path(bq.config.resolved_project(), "bench", "t")
        stream = write.create_write_stream(
            parent=parent, write_stream=types.WriteStream(type_=types.WriteStream.Type.COMMITTED)
        )
        schema = _rows(0, 1).schema.serialize().to_pybytes()

        def append(offset: int, table: pa.Table) -> float:
            request = types.AppendRowsRequest(
                write_stream=stream.name,
                offset=offset,
                arrow_rows=types.AppendRowsRequest.ArrowData(
                    writer_schema=types.ArrowSchema(serialized_schema=schema),
                    rows=types.ArrowRecordBatch(
                        serialized_record_batch=table.to_batches()[0].serialize().to_pybytes()
                    ),
                ),
            )
            started = time.perf_counter()
            (response,) = list(write.append_rows(iter([request])))
            elapsed = time.perf_counter() - started
            if response.error.code:
                raise RuntimeError(response.error.message)
            return elapsed

        offset = 0
        load_started = time.perf_counter()
        while offset < base_rows:
            count = min(LOAD_CHUNK_ROWS, base_rows - offset)
            append(offset, _rows(offset, count))
            offset += count
        load_s = time.perf_counter() - load_started
        timings = []
        for _ in range(repeats):
            timings.append(append(offset, _rows(offset, APPEND_ROWS)))
            offset += APPEND_ROWS
        counted = next(iter(rest.query_and_wait(f"SELECT COUNT(*) AS n FROM `{table_id}`")))["n"]
        if counted != offset:
            raise RuntimeError(f"counted {counted} rows, wrote {offset}")
        return {
            "append_ms_median": statistics.median(timings) * 1000,
            "load_s": load_s,
            "rss_growth_mb": _rss_mb() - rss_start,
            "rows": float(offset),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--variant", choices=["before", "after"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(measure(args.variant, args.base_rows, args.repeats)))
        return
    results = {}
    for variant in ("before", "after"):
        child = subprocess.run(
            [sys.executable, "-m", "onceover_tools.bench.localbq_snapshot", "--variant", variant,
             "--base-rows", str(args.base_rows), "--repeats", str(args.repeats)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        results[variant] = json.loads(child.stdout.strip().splitlines()[-1])
    before, after = results["before"], results["after"]
    print(f"10,000-row append on a {args.base_rows:,}-row table (median of {args.repeats})\n")
    print("| figure | snapshot per write (before) | no snapshot (after) | before / after |")
    print("|---|---:|---:|---:|")
    for key, label in (
        ("append_ms_median", "append, ms"),
        ("load_s", f"loading {args.base_rows:,} rows, s"),
        ("rss_growth_mb", "RSS growth over the run, MB"),
    ):
        ratio = before[key] / after[key] if after[key] else float("inf")
        print(f"| {label} | {before[key]:,.1f} | {after[key]:,.1f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
