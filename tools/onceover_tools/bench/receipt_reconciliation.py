"""Reconciliation by receipt on a 1,000,000-row stamped table: how many queries, how long,
and which keys it names after three keys are tampered with.

    .venv/bin/python -m onceover_tools.bench.receipt_reconciliation [--rows 1000000] [--batches 10]

The rows (INT64 key, stamped with one run and ``--batches`` batch ids) are appended to the
local BigQuery as Arrow through a COMMITTED stream, not through the Spark sink (a million
rows through Spark here would measure Spark); the receipts are the key checksums and
tallies computed in Python from the same rows with the sink's own functions
(onceover.key_checksum). The run is checked clean, then one key is duplicated (a stamped
copy) and two are deleted by DML, and it is checked again. Its output is what
docs/journal/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pyarrow as pa

from onceover.key_checksum import BucketTally, key_checksum

RUN = "bench-receipts"
CHUNK_ROWS = 100_000
DUPLICATED, DELETED = 123_457, (4_242, 987_654)


def _chunk(start: int, count: int, batches: int, rows: int) -> pa.Table:
    ids = list(range(start, start + count))
    per_batch = -(-rows // batches)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "amount": pa.array([i % 1000 for i in ids], pa.int64()),
        "_onceover_run_id": pa.array([RUN] * count, pa.string()),
        "_onceover_batch_id": pa.array([i // per_batch for i in ids], pa.int64()),
    })  # fmt: skip


def _load(write: Any, parent: str, rows: int, batches: int) -> float:
    """Append the rows through one COMMITTED stream; the seconds it took."""
    from google.cloud.bigquery_storage_v1 import types

    stream = write.create_write_stream(
        parent=parent, write_stream=types.WriteStream(type_=types.WriteStream.Type.COMMITTED)
    )
    schema = _chunk(0, 1, batches, rows).schema.serialize().to_pybytes()
    started = time.perf_counter()
    for offset in range(0, rows, CHUNK_ROWS):
        chunk = _chunk(offset, min(CHUNK_ROWS, rows - offset), batches, rows)
        request = types.AppendRowsRequest(
            write_stream=stream.name,
            offset=offset,
            arrow_rows=types.AppendRowsRequest.ArrowData(
                writer_schema=types.ArrowSchema(serialized_schema=schema),
                rows=types.ArrowRecordBatch(
                    serialized_record_batch=chunk.to_batches()[0].serialize().to_pybytes()
                ),
            ),
        )
        (response,) = list(write.append_rows(iter([request])))
        if response.error.code:
            raise RuntimeError(response.error.message)
    return time.perf_counter() - started


def main() -> None:
    from google.cloud import bigquery
    from onceover_backend.services.reconciliation.bigquery_counts import Scope, TableCounter
    from onceover_backend.services.reconciliation.receipt_check import Receipt, check_receipts

    from onceover.bigquery import bigquery_client, write_client
    from onceover_tools.localbq import LocalBigQuery

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    rows, batches = args.rows, args.batches

    with LocalBigQuery() as bq:
        rest, write = bigquery_client(bq.config), write_client(bq.config)
        rest.create_dataset("bench")
        table = f"{bq.config.project}.bench.usage"
        rest.create_table(bigquery.Table(table, schema=[
            bigquery.SchemaField("id", "INT64"),
            bigquery.SchemaField("amount", "INT64"),
            bigquery.SchemaField("_onceover_run_id", "STRING"),
            bigquery.SchemaField("_onceover_batch_id", "INT64"),
        ]))  # fmt: skip
        load_s = _load(write, write.table_path(bq.config.resolved_project(), "bench", "usage"),
                       rows, batches)  # fmt: skip

        started = time.perf_counter()
        per_batch = -(-rows // batches)
        receipts: dict[Any, Receipt] = {}
        for batch in range(batches):
            keys = range(batch * per_batch, min(rows, (batch + 1) * per_batch))
            tally = BucketTally(integer=True)
            for key in keys:
                tally.add(key)
            buckets = tally.receipt()
            assert buckets is not None
            receipts[batch] = Receipt.of([(len(keys), key_checksum(keys), list(buckets))])
        receipts_s = time.perf_counter() - started
        tally_buckets = sum(len(r.buckets) for r in receipts.values())

        scope = Scope(table, "id", run_id=RUN, group_by="_onceover_batch_id")

        def check(label: str) -> None:
            counter = TableCounter(rest, timeout_s=600)
            started = time.perf_counter()
            found = check_receipts(counter, scope, receipts)
            seconds = time.perf_counter() - started
            differing = {b: f for b, f in found.batches.items() if f.differs or f.duplicated}
            print(f"| {label} | {counter.queries} | {seconds:.2f} | {found.counts.rows:,} | "
                  + "; ".join(
                      f"batch {b}: duplicated {[(k.key, k.copies) for k in f.duplicated]}, "
                      f"missing {[k.key for k in f.missing]}, unresolved {len(f.unresolved)}"
                      for b, f in sorted(differing.items())
                  ) + " |")  # fmt: skip

        print(f"{rows:,} stamped rows in {batches} batches of one run, INT64 key "
              f"(loaded as Arrow in {load_s:.1f} s; receipts computed in Python in "
              f"{receipts_s:.1f} s, {tally_buckets:,} non-empty buckets in all)\n")  # fmt: skip
        print("| check | queries | seconds | rows found | keys named |")
        print("|---|---:|---:|---:|---|")
        check("clean")
        rest.query(
            f"INSERT INTO `{table}` SELECT * FROM `{table}` WHERE id = {DUPLICATED}"
        ).result()
        rest.query(f"DELETE FROM `{table}` WHERE id IN {DELETED}").result()
        check(f"{DUPLICATED} duplicated, {DELETED[0]} and {DELETED[1]} deleted")
        print("\nBytes processed: not reported by the local BigQuery; in BigQuery each query "
              "scans the key and the two stamp columns (query 1 also joins the key column "
              "of the whole table).")  # fmt: skip


if __name__ == "__main__":
    main()
