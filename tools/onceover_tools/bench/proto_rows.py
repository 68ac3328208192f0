"""Rows per second of ``serialize_rows`` against one protobuf message per row.

    .venv/bin/python -m onceover_tools.bench.proto_rows [--rows 200000] [--repeats 3]

Four scalar columns (INT64, FLOAT64, STRING, TIMESTAMP), about one NULL in ten. The
naive path is what proto rows cost without :mod:`onceover_jobs.sink.rows.proto_rows`: Arrow to
Python values, then a message object per row, filled and serialized. Both must give
the same bytes, else the figures mean nothing. The best of ``repeats`` runs is shown.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onceover_jobs.sink.rows.proto_rows import ROOT_MESSAGE, proto_schema, serialize_rows

FIELDS = [
    bigquery.SchemaField("id", "INT64"),
    bigquery.SchemaField("amount", "FLOAT64"),
    bigquery.SchemaField("name", "STRING"),
    bigquery.SchemaField("at", "TIMESTAMP"),
]


def _batch(rows: int) -> pa.RecordBatch:
    rng = np.random.default_rng(7)
    nulls = rng.random(rows) < 0.1
    ids = rng.integers(-(2**40), 2**40, rows)
    micros = rng.integers(0, 2_000_000_000_000_000, rows)
    return pa.record_batch({
        "id": pa.array(ids, pa.int64(), mask=nulls),
        "amount": pa.array(rng.normal(0, 1e6, rows), pa.float64()),
        "name": pa.array([f"customer-{i}" for i in ids], pa.string(), mask=nulls),
        "at": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    })  # fmt: skip


def _naive(batch: pa.RecordBatch) -> list[bytes]:
    schema = types.ProtoSchema.pb(proto_schema(FIELDS, batch.schema)).proto_descriptor
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="row.proto", syntax="proto2")
    file.message_type.add().CopyFrom(schema)
    pool.Add(file)
    row_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(ROOT_MESSAGE))
    # Timestamps as microseconds come from Arrow in one step; the rest is per row.
    columns = [batch.column(i) for i in range(3)] + [batch.column(3).cast(pa.int64())]
    names = [f.name for f in FIELDS]
    out = []
    for values in zip(*(c.to_pylist() for c in columns), strict=True):
        message = row_class(**{n: v for n, v in zip(names, values, strict=True) if v is not None})
        out.append(message.SerializeToString())
    return out


def _best_seconds(run: Callable[[], list[bytes]], repeats: int) -> tuple[float, list[bytes]]:
    best, result = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def benchmark(rows: int = 200_000, repeats: int = 3) -> None:
    """Print rows/s of both paths and the ratio."""
    batch = _batch(rows)
    vectorised, ours = _best_seconds(lambda: serialize_rows(batch, FIELDS), repeats)
    naive, theirs = _best_seconds(lambda: _naive(batch), repeats)
    if ours != theirs:
        raise RuntimeError("serialize_rows and the naive path disagree; figures withheld")
    print(f"{rows:,} rows x 4 scalar columns, best of {repeats}")
    print(
        f"  serialize_rows        {rows / vectorised:>12,.0f} rows/s  ({vectorised * 1e3:.0f} ms)"
    )
    print(f"  message per row       {rows / naive:>12,.0f} rows/s  ({naive * 1e3:.0f} ms)")
    print(f"  ratio                 {naive / vectorised:>12.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    benchmark(args.rows, args.repeats)


if __name__ == "__main__":
    main()
